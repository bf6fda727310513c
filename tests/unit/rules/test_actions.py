"""Actions: action_json parsing, SNS e-mail/SMS (moto), stoptraining (botocore Stubber).

moto 5 has SageMaker training jobs but finishes them at once (never InProgress) and does not
implement StopTrainingJob, so stoptraining is tested against a stubbed SageMaker client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sns.models import sns_backends

from evaluator.errors import ConfigurationError
from evaluator.rules import Actions, Rule, Termination, invoke_rule
from evaluator.rules.actions import SNS_TOPIC, default_region, parse_action_json

REGION = "us-east-1"
SDK_STYLE = (
    '[{\\"name\\": \\"StopTraining\\", \\"training_job_prefix\\": \\"My-Job\\"}, '
    '{\\"endpoint\\": \\"Me@Example.com\\", \\"name\\": \\"email\\"}]'
)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In-process moto for SNS, with fake credentials and no endpoint override."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SNS", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


def sns_topic(region: str = REGION) -> Any:
    backend = sns_backends[DEFAULT_ACCOUNT_ID][region]
    return backend.topics[f"arn:aws:sns:{region}:{DEFAULT_ACCOUNT_ID}:{SNS_TOPIC}"]


def subscriptions(region: str = REGION) -> list[dict[str, Any]]:
    client = boto3.client("sns", region_name=region)
    arn = f"arn:aws:sns:{region}:{DEFAULT_ACCOUNT_ID}:{SNS_TOPIC}"
    return list(client.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"])


class StubbedSageMaker:
    """A client factory whose SageMaker client answers from a botocore Stubber."""

    def __init__(self) -> None:
        self.client = boto3.client(
            "sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y"
        )
        self.stub = Stubber(self.client)

    def __call__(self, service: str) -> Any:
        assert service == "sagemaker"
        return self.client

    def lists(
        self, prefix: str, names: list[str], next_token: str | None = None, after: str | None = None
    ) -> None:
        expected = {
            "NameContains": prefix,
            "StatusEquals": "InProgress",
            "SortBy": "CreationTime",
            "SortOrder": "Descending",
            "MaxResults": 100,
        }
        if after:
            expected["NextToken"] = after
        response: dict[str, Any] = {"TrainingJobSummaries": [job(n) for n in names]}
        if next_token:
            response["NextToken"] = next_token
        self.stub.add_response("list_training_jobs", response, expected)


def job(name: str) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "TrainingJobStatus": "InProgress",
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}",
        "CreationTime": "2024-01-01T00:00:00Z",
    }


# ------------------------------------------------------------------------------ parsing


def test_sdk_escaped_list_decodes_and_only_names_are_lowercased() -> None:
    """The SDK's backslash-escaped JSON decodes; names are lower-cased, values keep their case."""
    assert parse_action_json(SDK_STYLE) == [
        {"name": "StopTraining", "training_job_prefix": "My-Job"},
        {"endpoint": "Me@Example.com", "name": "email"},
    ]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "email", "endpoint": "a@b.c"}',
        '[{"name": "email", "endpoint": "a@b.c"}]',
        '{\\"name\\": \\"email\\", \\"endpoint\\": \\"a@b.c\\"}',
        '  {"NAME": "email", "Endpoint": "a@b.c"}  ',
    ],
)
def test_plain_or_escaped_object_or_list(text: str) -> None:
    """One object or a list of objects, plain or escaped; keys match in any case."""
    assert parse_action_json(text) == [{"name": "email", "endpoint": "a@b.c"}]


@pytest.mark.parametrize("text", [None, "", "   ", "[]"])
def test_nothing_means_no_actions(text: str | None) -> None:
    """None, blank text and an empty list configure no action."""
    assert parse_action_json(text) == []


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{name: email}", "not valid JSON"),
        ('[{"name": "email"', "not valid JSON"),
        ("42", "got a JSON number"),
        ('"stoptraining"', "got a JSON string"),
        ('[{"name": "email"}, "sms"]', "non-object item"),
        ("null", "got null"),
    ],
)
def test_bad_action_json_is_a_configuration_error(text: str, says: str) -> None:
    """Invalid JSON or a wrong shape raises ConfigurationError naming action_json and the fault."""
    with pytest.raises(ConfigurationError, match="action_json") as caught:
        parse_action_json(text)
    assert says in str(caught.value)


@pytest.mark.parametrize("text", ['{"name": 3}', '{"name": "email", "endpoint": ["a@b.c"]}'])
def test_non_string_name_or_value_is_a_configuration_error(text: str) -> None:
    """A name or required value that is not a string is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="action_json"):
        Actions(text, "R", client_factory=lambda s: pytest.fail("no client needed"))


def test_unknown_name_and_missing_key_are_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An unknown action, a missing key or a missing name is logged and skipped; no client is made."""
    text = json.dumps(
        [{"name": "page_me"}, {"name": "email"}, {"name": "stoptraining"}, {"endpoint": "x"}]
    )
    with caplog.at_level(logging.WARNING, logger="evaluator.rules.actions"):
        actions = Actions(text, "R", client_factory=lambda s: pytest.fail("no client needed"))
    assert len(actions) == 0
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "'page_me' is not supported" in messages
    assert (
        "needs the key 'endpoint'" in messages and "needs the key 'training_job_prefix'" in messages
    )
    assert "has no name" in messages


def test_region_defaults_to_aws_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a region argument actions use AWS_REGION, else us-east-1."""
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert default_region() == "eu-west-3"
    monkeypatch.delenv("AWS_REGION")
    assert default_region() == "us-east-1"


# ------------------------------------------------------------------------------ SNS


@pytest.mark.parametrize(
    ("protocol", "endpoint", "attribute"),
    [("email", "Me@Example.com", "email"), ("sms", "+12223334444", "phone_num")],
)
def test_message_action_subscribes_and_publishes(
    aws: None, protocol: str, endpoint: str, attribute: str
) -> None:
    """email/sms subscribe the endpoint to SMDebugRules with a filter policy, then publish the
    rule's message with smdebug's subject and a matching attribute."""
    actions = Actions(json.dumps({"name": protocol, "endpoint": endpoint}), "MyRule")
    [sub] = subscriptions()
    assert (sub["Protocol"], sub["Endpoint"]) == (protocol, endpoint)
    client = boto3.client("sns", region_name=REGION)
    attributes = client.get_subscription_attributes(SubscriptionArn=sub["SubscriptionArn"])[
        "Attributes"
    ]
    assert json.loads(attributes["FilterPolicy"]) == {attribute: [endpoint]}
    actions.invoke("at step 7")
    [(_, message, subject, sent_attributes, _)] = sns_topic().sent_notifications
    assert subject == "SMDebugRule:MyRule fired"
    assert message == "SMDebugRule:MyRule fired. at step 7"
    assert sent_attributes == {attribute: {"Type": "String", "Value": endpoint}}


def test_an_existing_subscription_is_reused(aws: None) -> None:
    """A second rule with the same endpoint does not subscribe it again."""
    text = json.dumps({"name": "email", "endpoint": "a@b.c"})
    Actions(text, "One")
    Actions(text, "Two")
    assert len(subscriptions()) == 1


def test_explicit_region_wins(aws: None) -> None:
    """The region argument chooses where the topic lives."""
    actions = Actions(json.dumps({"name": "email", "endpoint": "a@b.c"}), "R", region="eu-west-1")
    assert actions.actions[0].topic_arn.startswith("arn:aws:sns:eu-west-1:")  # type: ignore[union-attr]
    assert len(subscriptions("eu-west-1")) == 1


def test_sns_failure_never_fails_the_rule(
    make_trial: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A rule whose SNS calls all fail still runs and fires at every step; the errors are logged."""
    client = boto3.client(
        "sns", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y"
    )
    stub = Stubber(client)
    for _ in range(4):  # once at creation, then once per firing
        stub.add_client_error("create_topic", "AuthorizationError", "not allowed to CreateTopic")

    class Always(Rule):
        def invoke_at_step(self, step: int) -> bool:
            return True

    with stub, caplog.at_level(logging.WARNING, logger="evaluator.rules.actions"):
        rule = Always(make_trial([0, 1, 2]))
        rule._actions = Actions(
            json.dumps({"name": "sms", "endpoint": "+12223334444"}),
            "Always",
            client_factory=lambda service: client,
        )
        result = invoke_rule(rule)
    assert result.fired_steps == (0, 1, 2) and result.ended_by == Termination.END_OF_DATA
    assert sum("AuthorizationError" in r.getMessage() for r in caplog.records) == 4


# ------------------------------------------------------------------------------ stoptraining


def test_stoptraining_stops_the_one_matching_job() -> None:
    """Jobs are listed at creation; on firing exactly one match (any case) is stopped, once."""
    factory = StubbedSageMaker()
    factory.lists("My-Job", ["my-job-2024", "not-My-Job-b"], next_token="t1")
    factory.lists("My-Job", ["other-my-job"], after="t1")
    factory.stub.add_response("stop_training_job", {}, {"TrainingJobName": "my-job-2024"})
    with factory.stub:
        actions = Actions(SDK_STYLE.split(", {")[0] + "]", "R", client_factory=factory)
        assert actions.actions[0].matching_jobs == ["my-job-2024"]  # type: ignore[union-attr]
        actions.invoke()
        actions.invoke()
        factory.stub.assert_no_pending_responses()


@pytest.mark.parametrize("names", [[], ["my-job-a", "my-job-b"]])
def test_stoptraining_stops_nothing_unless_exactly_one_matches(
    names: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """With no match or two matches, firing stops nothing and says why."""
    factory = StubbedSageMaker()
    factory.lists("my-job", names)
    with factory.stub, caplog.at_level(logging.WARNING, logger="evaluator.rules.actions"):
        text = '{"name": "stoptraining", "training_job_prefix": "my-job"}'
        Actions(text, "R", client_factory=factory).invoke()
        factory.stub.assert_no_pending_responses()
    assert f"found {len(names)} InProgress job(s)" in caplog.text


def test_stoptraining_failures_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A failed listing or a failed stop is logged, never raised."""
    factory = StubbedSageMaker()
    factory.stub.add_client_error(
        "list_training_jobs", "AccessDeniedException", "no ListTrainingJobs"
    )
    factory.lists("my-job", ["my-job-1"])
    factory.stub.add_client_error(
        "stop_training_job", "ValidationException", "job is not InProgress"
    )
    text = '{"name": "stoptraining", "training_job_prefix": "my-job"}'
    with factory.stub, caplog.at_level(logging.WARNING, logger="evaluator.rules.actions"):
        denied = Actions(text, "R", client_factory=factory)
        denied.invoke()
        failing = Actions(text, "R", client_factory=factory)
        failing.invoke()
    assert denied.actions[0].matching_jobs == []  # type: ignore[union-attr]
    assert "AccessDeniedException" in caplog.text and "ValidationException" in caplog.text


def test_action_json_must_be_text() -> None:
    """An already-decoded object is refused with a ConfigurationError, not an AttributeError."""
    with pytest.raises(ConfigurationError, match="action_json must be a string"):
        parse_action_json({"name": "email"})  # type: ignore[arg-type]


def test_invalid_action_json_is_not_echoed() -> None:
    """The error says where action_json is wrong, never what it holds (it may hold addresses)."""
    with pytest.raises(ConfigurationError) as caught:
        parse_action_json('[{"name": "email", "endpoint": "someone@example.com"')
    assert "someone" not in str(caught.value) and "line 1 column" in str(caught.value)


def test_endpoints_are_masked_in_failure_logs(caplog: pytest.LogCaptureFixture) -> None:
    """An SNS error that quotes the phone number is logged with the number masked."""
    client = boto3.client(
        "sns", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y"
    )
    stub = Stubber(client)
    stub.add_client_error("create_topic", "InvalidParameter", "bad endpoint +12223334444")
    with stub, caplog.at_level(logging.WARNING, logger="evaluator.rules.actions"):
        Actions(
            json.dumps({"name": "sms", "endpoint": "+12223334444"}),
            "R",
            client_factory=lambda service: client,
        )
    assert "+12223334444" not in caplog.text and "InvalidParameter" in caplog.text
