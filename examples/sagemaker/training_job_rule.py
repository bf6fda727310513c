"""Attach the rule evaluator image to a SageMaker training job as a Debugger rule: SageMaker then
runs it beside training (one processing job per rule), as it ran AWS's own RuleEvaluatorImage.

Only accounts that SageMaker Debugger still serves can use this path: AWS no longer opens
Debugger to new customers, and an account without it gets an error from CreateTrainingJob for
``DebugRuleConfigurations``. Everyone else: train with the smdebug hook writing to S3, then run
``processing_job_rule.py`` (a Processing job) over its output.

    python examples/sagemaker/training_job_rule.py \
        --image-uri 123456789012.dkr.ecr.us-west-2.amazonaws.com/debugger-rule-evaluator:0.1.0 \
        --role arn:aws:iam::123456789012:role/SageMakerTrainingRole \
        --training-image 763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-cpu-py311 \
        --source-dir s3://my-bucket/code/sourcedir.tar.gz --entry-point train.py \
        --bucket my-bucket --rule VanishingGradient --param threshold=0.0000001

Two ways to send the same job: boto3's ``create_training_job`` (the default, no extra package),
or ``--sdk``: the SageMaker Python SDK v2, ``Rule.custom(image_uri=…)`` on an ``Estimator``
(``pip install 'sagemaker>=2.200,<3'``). ``--dry-run`` prints the request and sends nothing.
tests/integration/test_sagemaker_examples.py checks the boto3 request against SageMaker's API
model with botocore's Stubber (no AWS); the --sdk path was checked by hand with sagemaker
2.257.7 (the same rules and hook; the SDK adds ProfilerConfig and orders collections its way).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any


def rule_configuration(
    *, image_uri: str, rule: str, parameters: Mapping[str, str], instance_type: str
) -> dict[str, Any]:
    """One ``DebugRuleConfiguration``: our image as the RuleEvaluatorImage, the built-in rule
    named by ``rule_to_invoke``; every parameter a string, as SageMaker sends it."""
    return {
        "RuleConfigurationName": rule,
        "RuleEvaluatorImage": image_uri,
        "InstanceType": instance_type,
        "VolumeSizeInGB": 10,
        "RuleParameters": {"rule_to_invoke": rule, **parameters},
    }


def training_request(
    *,
    job_name: str,
    role: str,
    training_image: str,
    entry_point: str,
    source_dir: str,
    bucket: str,
    rules: Sequence[Mapping[str, Any]],
    instance_type: str = "ml.m5.xlarge",
) -> dict[str, Any]:
    """The ``CreateTrainingJob`` request: a framework training image running your script, the
    Debugger hook writing to ``s3://<bucket>/debug`` and the rules evaluated by our image."""
    return {
        "TrainingJobName": job_name,
        "RoleArn": role,
        "AlgorithmSpecification": {"TrainingImage": training_image, "TrainingInputMode": "File"},
        # The framework containers read these as JSON strings.
        "HyperParameters": {
            "sagemaker_program": json.dumps(entry_point),
            "sagemaker_submit_directory": json.dumps(source_dir),
        },
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/output"},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "DebugHookConfig": {
            "S3OutputPath": f"s3://{bucket}/debug",
            "CollectionConfigurations": [
                {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "100"}},
                {"CollectionName": "losses", "CollectionParameters": {"save_interval": "10"}},
            ],
        },
        "DebugRuleConfigurations": list(rules),
    }


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image-uri", required=True, help="the evaluator image in your ECR")
    parser.add_argument("--role", required=True, help="the training job's execution role ARN")
    parser.add_argument("--training-image", required=True, help="a framework training image")
    parser.add_argument("--entry-point", required=True, help="your training script")
    parser.add_argument("--source-dir", required=True, help="s3://…/sourcedir.tar.gz with it")
    parser.add_argument("--bucket", required=True, help="for the model and the debug output")
    parser.add_argument("--rule", action="append", help="a built-in rule (repeatable)")
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a rule parameter"
    )
    parser.add_argument("--job-name", help="default: training-<time>")
    parser.add_argument("--rule-instance-type", default="ml.m5.large")
    parser.add_argument("--region", help="default: your AWS configuration's")
    parser.add_argument("--sdk", action="store_true", help="send it with the SageMaker SDK v2")
    parser.add_argument("--dry-run", action="store_true", help="print the request, send nothing")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, *, client: Any = None) -> dict[str, Any]:
    """Build the request, then send it (boto3 or the SDK) unless ``--dry-run``; returns it."""
    args = _arguments(argv)
    parameters = dict(p.split("=", 1) for p in args.param)
    rules = [
        rule_configuration(
            image_uri=args.image_uri,
            rule=name,
            parameters=parameters,
            instance_type=args.rule_instance_type,
        )
        for name in (args.rule or ["VanishingGradient"])
    ]
    request = training_request(
        job_name=args.job_name or f"training-{time.strftime('%Y%m%d-%H%M%S')}",
        role=args.role,
        training_image=args.training_image,
        entry_point=args.entry_point,
        source_dir=args.source_dir,
        bucket=args.bucket,
        rules=rules,
    )
    if args.dry_run:
        print(json.dumps(request, indent=2))
        return request
    if args.sdk:
        _run_with_sdk(request, client)
        return request
    if client is None:
        import boto3
        from botocore.exceptions import NoRegionError

        try:
            client = boto3.client("sagemaker", region_name=args.region)
        except NoRegionError:
            raise SystemExit("no AWS region: give --region, or set AWS_REGION") from None
    arn = client.create_training_job(**request)["TrainingJobArn"]
    print(
        f"started {arn}; the rules' statuses: aws sagemaker describe-training-job "
        f"--training-job-name {request['TrainingJobName']} --query DebugRuleEvaluationStatuses"
    )
    return request


def _run_with_sdk(request: Mapping[str, Any], client: Any = None) -> None:
    """The same job through the SageMaker Python SDK v2: ``Rule.custom`` names our image (sent
    through ``client``, a boto3 SageMaker client, when one is given)."""
    from sagemaker.debugger import CollectionConfig, DebuggerHookConfig, Rule
    from sagemaker.estimator import Estimator

    hook = request["DebugHookConfig"]
    rules = [
        Rule.custom(
            name=r["RuleConfigurationName"],
            image_uri=r["RuleEvaluatorImage"],
            instance_type=r["InstanceType"],
            volume_size_in_gb=r["VolumeSizeInGB"],
            rule_parameters=dict(r["RuleParameters"]),
        )
        for r in request["DebugRuleConfigurations"]
    ]
    collections = [
        CollectionConfig(c["CollectionName"], parameters=c["CollectionParameters"])
        for c in hook["CollectionConfigurations"]
    ]
    resources = request["ResourceConfig"]
    estimator = Estimator(
        image_uri=request["AlgorithmSpecification"]["TrainingImage"],
        role=request["RoleArn"],
        instance_count=resources["InstanceCount"],
        instance_type=resources["InstanceType"],
        output_path=request["OutputDataConfig"]["S3OutputPath"],
        hyperparameters=dict(request["HyperParameters"]),
        debugger_hook_config=DebuggerHookConfig(
            s3_output_path=hook["S3OutputPath"], collection_configs=collections
        ),
        rules=rules,
        disable_profiler=True,  # the Debugger profiler is not part of this image
        sagemaker_session=_session(client),
    )
    estimator.fit(job_name=request["TrainingJobName"], wait=False)
    print(estimator.latest_training_job.rule_job_summary())


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
