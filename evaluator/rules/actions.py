"""Rule actions from ``action_json``: stop the training job, or notify by e-mail or SMS.

A rule runs its actions each time ``invoke_at_step`` returns a true value, just before
``RuleEvaluationConditionMet`` is raised. The actions follow smdebug 1.0.34's, with the choices
of the container protocol (§3.5):

* ``action_json`` is decoded as the body of a double-quoted string literal (the SageMaker SDK
  escapes its quotes: ``[{\\"name\\": \\"email\\", ...}]``), then as JSON; plain JSON works too.
  It holds one object or a list of objects. Anything else is a ``ConfigurationError``.
* Only the ``name`` value is lower-cased (smdebug lower-cased the whole string, which broke
  job prefixes and e-mail addresses with capitals); keys match in any case.
* ``stoptraining`` (``training_job_prefix``) lists the InProgress training jobs whose name starts
  with the prefix (any case) when the rule is created, and on firing stops the job only if
  exactly one matched. ``email`` / ``sms`` (``endpoint``) subscribe the endpoint to the SNS topic
  ``SMDebugRules`` and publish to it on firing.
* An unknown name or a missing key is logged and skipped. AWS errors are logged and swallowed:
  an action never fails the rule.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import warnings
from collections.abc import Callable
from typing import Any

from evaluator.errors import ConfigurationError
from evaluator.redaction import mask_endpoint

__all__ = [
    "ALLOWED_ACTIONS",
    "SNS_TOPIC",
    "Actions",
    "MessageAction",
    "StopTrainingAction",
    "default_region",
    "parse_action_json",
]

log = logging.getLogger("evaluator.rules.actions")

ALLOWED_ACTIONS = ("stoptraining", "sms", "email")
SNS_TOPIC = "SMDebugRules"
_REQUIRED_KEY = {"stoptraining": "training_job_prefix", "sms": "endpoint", "email": "endpoint"}
_ATTRIBUTE = {"sms": "phone_num", "email": "email"}  # SNS filter-policy / message-attribute key
_MAX_PAGES = 50
_MAX_SUBJECT = 100  # SNS rejects longer subjects

ClientFactory = Callable[[str], Any]
"""Makes a boto3 client for a service name (``"sagemaker"``, ``"sns"``)."""


def default_region() -> str:
    """The region actions use when none is given: ``AWS_REGION``, else us-east-1 (as smdebug)."""
    return os.environ.get("AWS_REGION", "us-east-1")


class _Clients:
    """boto3 clients shared by one rule's actions, each made on first use."""

    def __init__(self, region: str, factory: ClientFactory | None) -> None:
        self.region = region
        self._factory = factory
        self._made: dict[str, Any] = {}

    def get(self, service: str) -> Any:
        if service not in self._made:
            if self._factory is not None:
                self._made[service] = self._factory(service)
            else:
                import boto3  # only rules that configure actions pay for the import

                self._made[service] = boto3.client(service, region_name=self.region)
        return self._made[service]


# ---------------------------------------------------------------------------------- parsing


def parse_action_json(text: str | None) -> list[dict[str, Any]]:
    """The action objects in ``text`` (keys lower-cased); ``[]`` for None or blank text.

    Raises ``ConfigurationError`` naming ``action_json`` when the text is not JSON, or not one
    object or a list of objects."""
    if text is None:
        return []
    if not isinstance(text, str):
        raise ConfigurationError(f"action_json must be a string of JSON, got {type(text).__name__}")
    if not text.strip():
        return []
    parsed = _decode(text.strip())
    items = [parsed] if isinstance(parsed, dict) else parsed
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ConfigurationError(
            f"action_json must be a JSON object or a list of JSON objects such as "
            f'[{{"name": "email", "endpoint": "me@example.com"}}], got {_kind(parsed)}'
        )
    return [{str(key).lower(): value for key, value in item.items()} for item in items]


def _decode(text: str) -> Any:
    error: json.JSONDecodeError | None = None
    for candidate in (_unescape(text), text):
        if candidate is None:
            continue
        try:
            return json.loads(candidate)
        except RecursionError:
            raise ConfigurationError("action_json is nested too deeply") from None
        except json.JSONDecodeError as e:
            error = error or e
    # Where it is wrong, never what it holds (it may hold e-mail addresses or phone numbers).
    where = f"{error.msg} at line {error.lineno} column {error.colno}" if error else "empty"
    raise ConfigurationError(f"action_json is not valid JSON: {where} (its text is not shown)")


def _unescape(text: str) -> str | None:
    """``text`` read as the body of a double-quoted Python string literal, as the SageMaker SDK
    checks it; None when it cannot be one (plain JSON has bare quotes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown escapes such as "\d" warn, and stay as written
        try:
            value = ast.literal_eval(f'"{text}"')
        except (SyntaxError, ValueError):
            return None
    return value if isinstance(value, str) else None


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list holding a non-object item"
    if value is None:
        return "null"
    kind = {bool: "boolean", int: "number", float: "number", str: "string"}.get(
        type(value), "value"
    )
    return f"a JSON {kind}"


# ---------------------------------------------------------------------------------- actions


class StopTrainingAction:
    """Stops the one InProgress training job whose name starts with the prefix."""

    name = "stoptraining"

    def __init__(self, rule_name: str, training_job_prefix: str, clients: _Clients) -> None:
        self.rule_name = rule_name
        self.training_job_prefix = training_job_prefix
        self._clients = clients
        self._stopped = False
        self.matching_jobs = self._find_jobs()
        log.info(
            "rule %s: stoptraining action for prefix %r in %s; matching InProgress jobs: %s",
            rule_name,
            training_job_prefix,
            clients.region,
            self.matching_jobs,
        )

    def _find_jobs(self) -> list[str]:
        prefix = self.training_job_prefix.lower()
        try:
            names = list(self._in_progress_jobs())
        except Exception as e:  # an action never fails the rule
            _log_failure(self.rule_name, "listing training jobs", e)
            return []
        return sorted({n for n in names if n.lower().startswith(prefix)})

    def _in_progress_jobs(self) -> Any:
        client = self._clients.get("sagemaker")
        request: dict[str, Any] = {
            "NameContains": self.training_job_prefix,
            "StatusEquals": "InProgress",
            "SortBy": "CreationTime",
            "SortOrder": "Descending",
            "MaxResults": 100,
        }
        for _ in range(_MAX_PAGES):
            page = client.list_training_jobs(**request)
            for job in page.get("TrainingJobSummaries", []):
                yield job["TrainingJobName"]
            if not page.get("NextToken"):
                return
            request["NextToken"] = page["NextToken"]

    def invoke(self, message: str = "") -> None:
        if len(self.matching_jobs) != 1:
            log.warning(
                "rule %s: stoptraining found %d InProgress job(s) starting with %r (%s); "
                "it stops a job only when exactly one matches",
                self.rule_name,
                len(self.matching_jobs),
                self.training_job_prefix,
                self.matching_jobs,
            )
            return
        if self._stopped:
            return
        job = self.matching_jobs[0]
        try:
            self._clients.get("sagemaker").stop_training_job(TrainingJobName=job)
        except Exception as e:
            _log_failure(self.rule_name, f"stopping training job {job}", e)
            return
        self._stopped = True
        log.info("rule %s: stopped training job %s", self.rule_name, job)


class MessageAction:
    """Sends an e-mail or SMS through the SNS topic ``SMDebugRules``, filtered to one endpoint."""

    def __init__(self, rule_name: str, protocol: str, endpoint: str, clients: _Clients) -> None:
        self.rule_name = rule_name
        self.name = protocol
        self.endpoint = endpoint
        self._clients = clients
        self._attribute = _ATTRIBUTE[protocol]
        self.topic_arn = self._subscribe()

    def _subscribe(self) -> str | None:
        try:
            sns = self._clients.get("sns")
            arn: str = sns.create_topic(Name=SNS_TOPIC)["TopicArn"]  # returns the existing one
            if not self._subscribed(sns, arn):
                sns.subscribe(
                    TopicArn=arn,
                    Protocol=self.name,
                    Endpoint=self.endpoint,
                    Attributes={"FilterPolicy": json.dumps({self._attribute: [self.endpoint]})},
                    ReturnSubscriptionArn=False,
                )
        except Exception as e:
            _log_failure(
                self.rule_name,
                f"subscribing {self.name} endpoint {mask_endpoint(self.endpoint)} to SNS topic "
                f"{SNS_TOPIC}",
                e,
                endpoint=self.endpoint,
            )
            return None
        log.info("rule %s: %s action subscribed to %s", self.rule_name, self.name, arn)
        return arn

    def _subscribed(self, sns: Any, arn: str) -> bool:
        request: dict[str, Any] = {"TopicArn": arn}
        for _ in range(_MAX_PAGES):
            page = sns.list_subscriptions_by_topic(**request)
            for sub in page.get("Subscriptions", []):
                if sub.get("Protocol") == self.name and sub.get("Endpoint") == self.endpoint:
                    return True
            if not page.get("NextToken"):
                return False
            request["NextToken"] = page["NextToken"]
        return False

    def invoke(self, message: str = "") -> None:
        subject = f"SMDebugRule:{self.rule_name} fired"
        try:
            sns = self._clients.get("sns")
            arn = self.topic_arn or sns.create_topic(Name=SNS_TOPIC)["TopicArn"]
            sns.publish(
                TopicArn=arn,
                Subject=subject[:_MAX_SUBJECT],
                Message=f"{subject}. {message}",
                MessageAttributes={
                    self._attribute: {"DataType": "String", "StringValue": self.endpoint}
                },
            )
        except Exception as e:
            _log_failure(
                self.rule_name, f"publishing to SNS topic {SNS_TOPIC}", e, endpoint=self.endpoint
            )


def _log_failure(
    rule_name: str, what: str, error: Exception, *, endpoint: str | None = None
) -> None:
    """Log an action's failure; an e-mail address or phone number in the error's text is
    masked (``a***@example.com``)."""
    text = str(error)
    if endpoint:
        text = text.replace(endpoint, mask_endpoint(endpoint))
    log.warning(
        "rule %s: action failed while %s: %s: %s (the rule goes on)",
        rule_name,
        what,
        type(error).__name__,
        text,
    )


# ---------------------------------------------------------------------------------- Actions


class Actions:
    """The actions of one rule, built from its ``action_json`` (smdebug's ``Actions``).

    ``region`` defaults to ``default_region()``; ``client_factory`` makes boto3 clients (tests
    pass stubbed ones). Invalid ``action_json`` raises ``ConfigurationError``."""

    def __init__(
        self,
        action_str: str | None,
        rule_name: str,
        *,
        region: str | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        self.rule_name = rule_name
        self._clients = _Clients(region or default_region(), client_factory)
        self.actions: list[StopTrainingAction | MessageAction] = []
        for spec in parse_action_json(action_str):
            action = self._build(spec)
            if action is not None:
                self.actions.append(action)

    def _build(self, spec: dict[str, Any]) -> StopTrainingAction | MessageAction | None:
        name = spec.get("name")
        if name is None:
            log.warning(
                "rule %s: an action has no name (its keys: %s); skipped",
                self.rule_name,
                ", ".join(sorted(map(str, spec))),
            )
            return None
        if not isinstance(name, str):
            raise ConfigurationError(
                f"action_json: action name must be a string, got {type(name).__name__}"
            )
        name = name.lower()
        if name not in ALLOWED_ACTIONS:
            log.warning(
                "rule %s: action %r is not supported (allowed: %s); skipped",
                self.rule_name,
                name,
                ", ".join(ALLOWED_ACTIONS),
            )
            return None
        key = _REQUIRED_KEY[name]
        value = spec.get(key)
        if value is None:
            log.warning("rule %s: action %r needs the key %r; skipped", self.rule_name, name, key)
            return None
        if not isinstance(value, str):
            raise ConfigurationError(
                f"action_json: {key} of action {name!r} must be a string, got "
                f"{type(value).__name__}"
            )
        if name == "stoptraining":
            return StopTrainingAction(self.rule_name, value, self._clients)
        return MessageAction(self.rule_name, name, value, self._clients)

    def __len__(self) -> int:
        return len(self.actions)

    def invoke(self, message: str = "") -> None:
        """Run every action; failures are logged, never raised."""
        for action in self.actions:
            try:
                action.invoke(message)
            except Exception as e:  # belt and braces: the actions already catch AWS errors
                _log_failure(self.rule_name, f"running {action.name}", e)
