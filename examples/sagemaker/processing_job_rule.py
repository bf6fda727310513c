"""Run the rule evaluator image as a SageMaker Processing job over the debug output of a training
job that has already run (or is running). Processing jobs are open to every AWS account, with
or without SageMaker Debugger.

    python examples/sagemaker/processing_job_rule.py \
        --image-uri 123456789012.dkr.ecr.us-west-2.amazonaws.com/debugger-rule-evaluator:0.1.0 \
        --role arn:aws:iam::123456789012:role/SageMakerProcessingRole \
        --training-job mnist-2026-11-21-01 \
        --output s3://my-bucket/rule-output \
        --rule VanishingGradient --param threshold=0.0000001

The trial is ``--debug-output s3://…`` or found from ``--training-job`` (its DebugHookConfig's
S3OutputPath, then ``<job>/debug-output``). ``--dry-run`` prints the request and sends nothing.

Two ways to send the same job: boto3's ``create_processing_job`` (the default, no extra
package), or ``--sdk``: the SageMaker Python SDK v2's ``Processor`` (``pip install
'sagemaker>=2.200,<3'``). tests/integration/test_sagemaker_examples.py checks the boto3 request
against SageMaker's API model with botocore's Stubber (no AWS), and the --sdk path
where the SDK is installed.

The job ends Completed for NoIssuesFound and Failed for every other outcome (exit 1 is
IssuesFound); the verdict is in ``<output>/rule_evaluation_result.json`` and
``rule_report.html``, and the message in the job's ExitMessage / FailureReason.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

TENSORS = "/opt/ml/processing/input/tensors"  # where the evaluator looks for the trial
RULE_OUTPUT = "/opt/ml/processing/output/rule"  # where it writes the result and the report


def processing_request(
    *,
    job_name: str,
    image_uri: str,
    role: str,
    debug_output: str,
    output: str,
    rule: str,
    parameters: Mapping[str, str],
    instance_type: str = "ml.m5.large",
    volume_size_gb: int = 10,
    max_runtime_seconds: int = 86400,
    wait_for_training_end: bool = False,
) -> dict[str, Any]:
    """The ``CreateProcessingJob`` request: the trial as a processing input at the place the
    evaluator reads (it follows the input's S3 URI), the rule and its parameters as the
    environment, the output folder uploaded at the end."""
    environment = {"rule_to_invoke": rule, **parameters}
    # A finished job's output is read as it is; while training still writes, wait for the end
    # marker (which only SageMaker Debugger or a hook outside SageMaker writes).
    environment["wait_for_training_end"] = "true" if wait_for_training_end else "false"
    return {
        "ProcessingJobName": job_name,
        "RoleArn": role,
        "AppSpecification": {"ImageUri": image_uri},
        "Environment": environment,
        "ProcessingInputs": [
            {
                "InputName": "tensors",
                "S3Input": {
                    "S3Uri": debug_output,
                    "LocalPath": TENSORS,
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
                        "S3Uri": output,
                        "LocalPath": RULE_OUTPUT,
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": 1,
                "InstanceType": instance_type,
                "VolumeSizeInGB": volume_size_gb,
            }
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime_seconds},
    }


def debug_output_of(client: Any, training_job: str) -> str:
    """``<DebugHookConfig.S3OutputPath>/<job>/debug-output``, where SageMaker's hook writes."""
    described = client.describe_training_job(TrainingJobName=training_job)
    hook = described.get("DebugHookConfig") or {}
    if not hook.get("S3OutputPath"):
        raise SystemExit(
            f"training job {training_job} has no DebugHookConfig: give --debug-output s3://… "
            "(the folder your smdebug hook wrote to)"
        )
    return f"{hook['S3OutputPath'].rstrip('/')}/{training_job}/debug-output"


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image-uri", required=True, help="the evaluator image in your ECR")
    parser.add_argument("--role", required=True, help="the processing job's execution role ARN")
    trial = parser.add_mutually_exclusive_group(required=True)
    trial.add_argument("--training-job", help="the training job whose debug output to read")
    trial.add_argument("--debug-output", help="the trial: s3://bucket/prefix/…/debug-output")
    parser.add_argument("--output", required=True, help="s3:// folder for the result and report")
    parser.add_argument("--rule", default="VanishingGradient", help="a built-in rule name")
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a rule parameter"
    )
    parser.add_argument("--job-name", help="default: rules-<rule>-<time>")
    parser.add_argument("--instance-type", default="ml.m5.large")
    parser.add_argument(
        "--wait-for-training-end",
        action="store_true",
        help="the training job still runs: follow it until training_job_end.ts",
    )
    parser.add_argument("--region", help="default: your AWS configuration's")
    parser.add_argument("--sdk", action="store_true", help="send it with the SageMaker SDK v2")
    parser.add_argument("--dry-run", action="store_true", help="print the request, send nothing")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, client: Any = None) -> dict[str, Any]:
    """Build the request, then send it (boto3 or the SDK) unless ``--dry-run``; returns it."""
    args = _arguments(argv)
    if client is None and not (args.dry_run and args.debug_output):
        client = sagemaker_client(args.region)  # a dry run over --debug-output needs no AWS
    debug_output = args.debug_output or debug_output_of(client, args.training_job)
    parameters = dict(p.split("=", 1) for p in args.param)
    job_name = args.job_name or f"rules-{args.rule.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
    request = processing_request(
        job_name=job_name[:63],
        image_uri=args.image_uri,
        role=args.role,
        debug_output=debug_output,
        output=args.output,
        rule=args.rule,
        parameters=parameters,
        instance_type=args.instance_type,
        wait_for_training_end=args.wait_for_training_end,
    )
    if args.dry_run:
        print(json.dumps(request, indent=2))
    elif args.sdk:
        _run_with_sdk(request, client)
    else:
        arn = client.create_processing_job(**request)["ProcessingJobArn"]
        print(
            f"started {arn}; follow it with: aws sagemaker describe-processing-job "
            f"--processing-job-name {job_name}"
        )
    return request


def sagemaker_client(region: str | None) -> Any:
    """A boto3 SageMaker client; without a region (none given, none configured), a one-line
    message saying how to give one instead of botocore's traceback."""
    import boto3
    from botocore.exceptions import NoRegionError

    try:
        return boto3.client("sagemaker", region_name=region)
    except NoRegionError:
        raise SystemExit(
            "no AWS region: give --region (or set AWS_REGION / AWS_DEFAULT_REGION, or a region "
            "in ~/.aws/config); --dry-run with --debug-output needs none"
        ) from None


def _run_with_sdk(request: Mapping[str, Any], client: Any = None) -> None:
    """The same job through the SageMaker Python SDK v2's Processor (sent through ``client``,
    a boto3 SageMaker client, when one is given)."""
    from sagemaker.processing import ProcessingInput, ProcessingOutput, Processor

    cluster = request["ProcessingResources"]["ClusterConfig"]
    source = request["ProcessingInputs"][0]["S3Input"]
    target = request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]
    processor = Processor(
        image_uri=request["AppSpecification"]["ImageUri"],
        role=request["RoleArn"],
        instance_count=cluster["InstanceCount"],
        instance_type=cluster["InstanceType"],
        volume_size_in_gb=cluster["VolumeSizeInGB"],
        max_runtime_in_seconds=request["StoppingCondition"]["MaxRuntimeInSeconds"],
        env=dict(request["Environment"]),
        sagemaker_session=_session(client),
    )
    processor.run(
        inputs=[
            ProcessingInput(
                source=source["S3Uri"], destination=source["LocalPath"], input_name="tensors"
            )
        ],
        outputs=[
            ProcessingOutput(
                source=target["LocalPath"], destination=target["S3Uri"], output_name="rule-output"
            )
        ],
        job_name=request["ProcessingJobName"],
        wait=False,
        logs=False,
    )
    print(f"started {request['ProcessingJobName']} with the SageMaker SDK")


def _session(client: Any) -> Any:
    """A SageMaker SDK session over ``client``; None (the SDK's default) without one."""
    if client is None:
        return None
    import boto3
    from sagemaker.session import Session

    boto_session = boto3.Session(region_name=client.meta.region_name)
    return Session(boto_session=boto_session, sagemaker_client=client)


if __name__ == "__main__":
    main()
