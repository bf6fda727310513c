"""examples/sagemaker/: the requests the scripts send are valid for SageMaker's API (botocore's
Stubber checks them against the service model; no AWS is called), hold what the evaluator needs,
and a processing job's request is read by the evaluator as SageMaker would hand it over.

The scripts' boto3 path is what is checked here (create_training_job, create_processing_job);
their ``--sdk`` path (the SageMaker Python SDK v2, too heavy for the test extra) is checked
where the SDK is installed."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import boto3
import pytest
from botocore.stub import ANY, Stubber

from evaluator.config import load_config
from tests.support.evaluator_cli import ROOT

EXAMPLES = ROOT / "examples" / "sagemaker"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/debugger-rule-evaluator:0.1.0"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def client() -> object:
    """A SageMaker client that never reaches AWS (the Stubber answers)."""
    return boto3.client(
        "sagemaker",
        region_name="us-west-2",
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key="example",
    )


def _described(job: str) -> dict[str, object]:
    now = datetime(2026, 11, 21, tzinfo=UTC)
    return {
        "TrainingJobName": job,
        "TrainingJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{job}",
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://my-bucket/output/{job}/model.tar.gz"},
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {
            "InstanceType": "ml.m5.xlarge",
            "InstanceCount": 1,
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "CreationTime": now,
        "DebugHookConfig": {"S3OutputPath": "s3://my-bucket/debug"},
    }


EXPECTED_PROCESSING = {
    "ProcessingJobName": "rules-vanishing-1",
    "RoleArn": ROLE,
    "AppSpecification": {"ImageUri": IMAGE},
    "Environment": {
        "rule_to_invoke": "VanishingGradient",
        "threshold": "0.0001",
        "wait_for_training_end": "false",
    },
    "ProcessingInputs": [
        {
            "InputName": "tensors",
            "S3Input": {
                "S3Uri": "s3://my-bucket/debug/mnist-1/debug-output",
                "LocalPath": "/opt/ml/processing/input/tensors",
                "S3DataType": "S3Prefix",
                "S3InputMode": "File",
            },
        }
    ],
    "ProcessingOutputConfig": {
        "Outputs": [
            {
                "OutputName": "rule-output",
                "S3Output": {
                    "S3Uri": "s3://my-bucket/rule-output",
                    "LocalPath": "/opt/ml/processing/output/rule",
                    "S3UploadMode": "EndOfJob",
                },
            }
        ]
    },
    "ProcessingResources": {
        "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.large", "VolumeSizeInGB": 10}
    },
    "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
}

PROCESSING_ARGS = [
    "--image-uri",
    IMAGE,
    "--role",
    ROLE,
    "--training-job",
    "mnist-1",
    "--output",
    "s3://my-bucket/rule-output",
    "--rule",
    "VanishingGradient",
    "--param",
    "threshold=0.0001",
    "--job-name",
    "rules-vanishing-1",
]


def test_processing_job_example_sends_a_valid_request_over_the_jobs_debug_output(
    client: object,
) -> None:
    """The processing example finds the training job's debug output and sends a
    CreateProcessingJob that SageMaker's API model accepts, with the trial as the tensors
    input, the rule in the environment and the rule output uploaded."""
    module = _load("processing_job_rule")
    with Stubber(client) as stub:
        stub.add_response(
            "describe_training_job", _described("mnist-1"), {"TrainingJobName": "mnist-1"}
        )
        stub.add_response(
            "create_processing_job",
            {"ProcessingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:processing-job/x"},
            EXPECTED_PROCESSING,
        )
        module.main(PROCESSING_ARGS, client=client)
        stub.assert_no_pending_responses()


def test_the_evaluator_reads_the_processing_request_as_sagemaker_hands_it_over(
    tmp_path: Path,
) -> None:
    """Given the processing job config SageMaker writes from that request, the evaluator
    reads the trial from S3, runs the rule with its parameter, and does not wait for an end
    marker that nothing would write."""
    request = _load("processing_job_rule").processing_request(
        job_name="rules-vanishing-1",
        image_uri=IMAGE,
        role=ROLE,
        debug_output="s3://my-bucket/debug/mnist-1/debug-output",
        output="s3://my-bucket/rule-output",
        rule="VanishingGradient",
        parameters={"threshold": "0.0001"},
    )
    config_file = tmp_path / "config" / "processingjobconfig.json"
    config_file.parent.mkdir()
    config_file.write_text(json.dumps(request), encoding="utf-8")
    (tmp_path / "processing").mkdir()
    config = load_config([], dict(request["Environment"]), opt_ml_root=tmp_path)
    assert config.base_trial == "s3://my-bucket/debug/mnist-1/debug-output"
    assert [r.name for r in config.rules] == ["VanishingGradient"]
    assert config.rules[0].parameters == {"threshold": "0.0001"}
    assert config.wait_for_training_end is False
    assert config.output_dir == tmp_path / "processing" / "output" / "rule"


def test_training_job_example_names_the_image_as_rule_evaluator(client: object) -> None:
    """The training example sends a CreateTrainingJob that SageMaker's API model accepts, with
    a Debugger hook and one DebugRuleConfiguration per rule naming our image."""
    module = _load("training_job_rule")
    rule = {
        "RuleConfigurationName": "VanishingGradient",
        "RuleEvaluatorImage": IMAGE,
        "InstanceType": "ml.m5.large",
        "VolumeSizeInGB": 10,
        "RuleParameters": {"rule_to_invoke": "VanishingGradient", "threshold": "0.0001"},
    }
    expected = {
        "TrainingJobName": "mnist-1",
        "RoleArn": ROLE,
        "AlgorithmSpecification": ANY,
        "HyperParameters": {
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": '"s3://my-bucket/code/sourcedir.tar.gz"',
        },
        "OutputDataConfig": {"S3OutputPath": "s3://my-bucket/output"},
        "ResourceConfig": ANY,
        "StoppingCondition": ANY,
        "DebugHookConfig": {
            "S3OutputPath": "s3://my-bucket/debug",
            "CollectionConfigurations": ANY,
        },
        "DebugRuleConfigurations": [
            rule,
            {
                **rule,
                "RuleConfigurationName": "LossNotDecreasing",
                "RuleParameters": {"rule_to_invoke": "LossNotDecreasing", "threshold": "0.0001"},
            },
        ],
    }
    with Stubber(client) as stub:
        stub.add_response(
            "create_training_job",
            {"TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/mnist-1"},
            expected,
        )
        module.main(
            [
                "--image-uri",
                IMAGE,
                "--role",
                ROLE,
                "--training-image",
                "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-cpu-py311",
                "--entry-point",
                "train.py",
                "--source-dir",
                "s3://my-bucket/code/sourcedir.tar.gz",
                "--bucket",
                "my-bucket",
                "--rule",
                "VanishingGradient",
                "--rule",
                "LossNotDecreasing",
                "--param",
                "threshold=0.0001",
                "--job-name",
                "mnist-1",
            ],
            client=client,
        )
        stub.assert_no_pending_responses()


def test_dry_run_prints_the_request_and_sends_nothing(
    client: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """--dry-run prints the JSON request; the Stubber, with no response queued, saw no call."""
    module = _load("processing_job_rule")
    args = [a if a != "mnist-1" else "x" for a in PROCESSING_ARGS]
    args[args.index("--training-job")] = "--debug-output"
    args[args.index("x")] = "s3://my-bucket/debug/x/debug-output"
    with Stubber(client) as stub:
        module.main([*args, "--dry-run"], client=client)
        stub.assert_no_pending_responses()
    printed = json.loads(capsys.readouterr().out)
    assert (
        printed["ProcessingInputs"][0]["S3Input"]["S3Uri"] == "s3://my-bucket/debug/x/debug-output"
    )


def _sent(client: object, operation: str) -> list[dict[str, object]]:
    """Every request of ``operation`` the client is asked to send, as the caller gave it."""
    seen: list[dict[str, object]] = []
    client.meta.events.register(  # type: ignore[attr-defined]
        f"provide-client-params.sagemaker.{operation}",
        lambda params, **_: seen.append(dict(params)),
    )
    return seen


def test_the_sdk_path_sends_the_same_processing_job(
    client: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the SageMaker Python SDK v2 installed (not in the test extra: it is heavy), --sdk
    sends the boto3 path's CreateProcessingJob, plus the SDK's explicit defaults."""
    pytest.importorskip("sagemaker.processing")
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    module = _load("processing_job_rule")
    seen = _sent(client, "CreateProcessingJob")
    with Stubber(client) as stub:
        stub.add_response(
            "create_processing_job",
            {"ProcessingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:processing-job/x"},
        )
        args = [a for a in PROCESSING_ARGS]
        args[args.index("--training-job") : args.index("--training-job") + 2] = [
            "--debug-output",
            "s3://my-bucket/debug/mnist-1/debug-output",
        ]
        module.main([*args, "--sdk"], client=client)
    [sent] = seen
    s3_input = sent["ProcessingInputs"][0]["S3Input"]  # type: ignore[index]
    assert s3_input["S3DataDistributionType"] == "FullyReplicated"  # an SDK default
    for key, value in EXPECTED_PROCESSING.items():
        if key not in ("ProcessingInputs", "ProcessingOutputConfig"):
            assert sent[key] == value, key
    assert s3_input["S3Uri"] == "s3://my-bucket/debug/mnist-1/debug-output"
    assert s3_input["LocalPath"] == "/opt/ml/processing/input/tensors"


def test_a_dry_run_needs_no_aws_settings(tmp_path: Path) -> None:
    """--dry-run over --debug-output prints the request with no region or credentials set;
    a lookup that needs AWS without a region says how to give one, in one line."""
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AWS_CONFIG_FILE": str(tmp_path / "no")}
    args = [sys.executable, str(EXAMPLES / "processing_job_rule.py"), "--image-uri", IMAGE,
            "--role", ROLE, "--output", "s3://my-bucket/rule-output", "--dry-run"]  # fmt: skip
    done = subprocess.run([*args, "--debug-output", "s3://my-bucket/debug"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["AppSpecification"]["ImageUri"] == IMAGE
    lookup = subprocess.run([*args, "--training-job", "mnist"], env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert lookup.returncode != 0
    assert lookup.stderr.strip().splitlines() == [lookup.stderr.strip()]  # one line, no trace
    assert "--region" in lookup.stderr
