"""``--webhook-url``: every status change of a run POSTed as JSON to a URL the user gives (a
chat channel's incoming webhook, an alerting service, their own endpoint).

One POST per rule status change (``InProgress``, then the outcome) and one for the supervisor's
last word on a run it ends. The body holds the fields of the rule's entry in the result file
(``rule``, ``configuration_name``, ``status``, ``exit_code``, ``step``, ``fired_steps``,
``steps_evaluated``, ``details``, ``error_type``), the first firing's ``diagnosis``, and
``event``, ``trial``, ``run_key``, ``time`` and ``text``: one readable sentence, the field
Slack's and Mattermost's incoming webhooks show.

Delivery never delays the verdict: the posts go out one by one from a thread of their own,
each with a timeout of ``TIMEOUT_SECONDS``, retried up to ``ATTEMPTS`` times on a connection
error, a timeout, a 408, 425, 429 or 5xx answer, after a pause that doubles; ``wait`` (after
the verdict) gives what is left ``WAIT_SECONDS`` at most, then drops it with a warning. The URL is a secret (a Slack webhook's path is its key): logs
name its scheme and host only.
"""

from __future__ import annotations

import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
import structlog

from evaluator.config.values import webhook_url_value
from evaluator.errors import ConfigurationError
from evaluator.redaction import escape_controls, url_origin
from evaluator.sinks.events import NullSink, RunClosed, RunRecord, StatusChanged
from evaluator.status.files import iso, rule_document

__all__ = ["ATTEMPTS", "TIMEOUT_SECONDS", "WAIT_SECONDS", "WebhookSink", "check_webhook_url"]

TIMEOUT_SECONDS = 5.0  # one POST, connecting included
ATTEMPTS = 3  # per status change
WAIT_SECONDS = 10.0  # after the verdict, for the posts still queued
FIRST_PAUSE = 0.5  # seconds before the first retry; doubled before each next one
MAX_RETRY_AFTER = 5.0  # a longer Retry-After is cut to this
_RULE_FIELDS = ("rule", "configuration_name", "status", "exit_code", "step", "fired_steps",
                "steps_evaluated", "details", "error_type")  # fmt: skip
_RETRIED = frozenset({408, 425, 429, 500, 502, 503, 504})
_STOP = object()
_log = structlog.get_logger("evaluator.sinks.webhook")

Post = Callable[[str, bytes, float], int]  # (url, body, timeout) -> HTTP status


def check_webhook_url(url: str) -> str:
    """``url`` if it is an http(s) URL with a host; else the ConfigurationError the
    configuration gives (``webhook_url_value``: it names the flag, never the URL)."""
    checked = webhook_url_value({"webhook_url": url})
    if checked is None:
        raise ConfigurationError("webhook_url is empty: give an http:// or https:// URL")
    return checked


def post_json(url: str, body: bytes, timeout: float) -> int:
    """POST ``body`` as JSON; the HTTP status (an error status is returned, not raised)."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "rule-evaluator-webhook"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (http(s) only)
            status: int = answer.status
            return status
    except urllib.error.HTTPError as e:
        e.close()
        return e.code


class WebhookSink(NullSink):
    """Posts each status change to ``url`` (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        trial: str | None = None,
        post: Post = post_json,
        pause: float = FIRST_PAUSE,
    ) -> None:
        self._url = check_webhook_url(url)
        self._trial = trial  # named in the supervisor's last word (its events carry none)
        self._post, self._pause = post, pause
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.sent = 0  # posts the endpoint accepted (2xx)
        self.failed = 0  # posts given up on

    # ---- events -------------------------------------------------------------------------

    def status_changed(self, event: StatusChanged) -> None:
        document = rule_document(event.rule)
        payload = {key: document[key] for key in _RULE_FIELDS}
        if document.get("step_mode"):  # a step the writer logged in a mode
            payload["step_mode"] = document["step_mode"]
        reasons = (document.get("evidence") or {}).get("reasons") or [{}]
        payload["diagnosis"] = reasons[0].get("diagnosis")
        self._send({"event": "rule_status", **payload, **_run_fields(event.run)})

    def run_closed(self, event: RunClosed) -> None:
        text = escape_controls(event.text)
        self._send(
            {
                "event": "run_closed",
                "rule": event.culprit,
                "status": event.status,
                "exit_code": event.exit_code,
                "details": text,
                "error_type": event.error_type,
                "trial": self._trial,
                "time": iso(datetime.now(UTC)),
            }
        )

    def wait(self) -> None:
        """Give the posts still queued ``WAIT_SECONDS`` at most, then drop them."""
        thread = self._thread
        if thread is None:
            return
        self._queue.put(_STOP)
        thread.join(WAIT_SECONDS)
        if thread.is_alive():
            left = self._queue.qsize()
            _log.warning(
                "webhook posts dropped",
                endpoint=url_origin(self._url),
                queued=left,
                waited=WAIT_SECONDS,
            )

    # ---- delivery (the sink's own thread) -------------------------------------------------

    def _send(self, payload: dict[str, Any]) -> None:
        payload["text"] = _sentence(payload)
        self._queue.put(orjson.dumps(payload))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._deliver, name="webhook", daemon=True)
                self._thread.start()

    def _deliver(self) -> None:
        while True:
            body = self._queue.get()
            if body is _STOP:
                return
            if self._post_with_retries(body):
                self.sent += 1
            else:
                self.failed += 1

    def _post_with_retries(self, body: bytes) -> bool:
        pause = self._pause
        for attempt in range(1, ATTEMPTS + 1):
            try:
                status = self._post(self._url, body, TIMEOUT_SECONDS)
                problem = f"HTTP {status}"
            except (OSError, ValueError) as e:  # refused, unreachable, timed out, TLS
                status, problem = 0, type(e).__name__
            if 200 <= status < 300:
                return True
            if status and status not in _RETRIED:
                break
            if attempt < ATTEMPTS:
                time.sleep(pause)
                pause *= 2
        _log.warning(
            "webhook post failed", endpoint=url_origin(self._url), answer=problem, attempts=attempt
        )
        return False


def _run_fields(run: RunRecord) -> dict[str, Any]:
    return {"trial": run.trial, "run_key": run.run_key, "time": iso(datetime.now(UTC))}


def _sentence(payload: Mapping[str, Any]) -> str:
    """One line a chat shows: the rule, its status, where, and the details."""
    rule = payload.get("rule") or "the run"
    status = payload.get("status") or "?"
    mode = f" ({payload['step_mode']})" if payload.get("step_mode") else ""
    where = f" at step {payload['step']}{mode}" if payload.get("step") is not None else ""
    trial = f" on {payload['trial']}" if payload.get("trial") else ""
    details = payload.get("details")
    text = f"{rule}: {status}{where}{trial}"
    return f"{text}. {details}" if details and status != "InProgress" else text
