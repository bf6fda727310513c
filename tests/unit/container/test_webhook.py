"""``--webhook-url`` (``evaluator.sinks.webhook``): a real HTTP server on 127.0.0.1 receives one
POST per status change of a real run; a failing, refusing or slow endpoint never changes or
delays the verdict; the URL (a secret: a chat webhook's path is its key) shows nowhere."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from container.cli import evaluate
from container.compose import final_sinks
from container.last_word import conclude
from evaluator.config.values import webhook_url_value
from evaluator.errors import ConfigurationError
from evaluator.reporting import StatusReporter
from evaluator.sinks import webhook
from evaluator.sinks.webhook import WebhookSink
from evaluator.status import RESULT_FILE_NAME

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "trials" / "vanishing_gradients"
SECRET_PATH = "/services/T0AAA/B0BBB/Xy7SeCrEtKeY"


class _Endpoint:
    """An HTTP server on 127.0.0.1 that records each POST's JSON body and answers with the
    statuses of ``answers`` in turn (then 200), after ``delay`` seconds."""

    def __init__(self, answers: list[int] | None = None, delay: float = 0.0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.answers, self.delay = list(answers or []), delay
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                time.sleep(endpoint.delay)
                status = endpoint.answers.pop(0) if endpoint.answers else 200
                endpoint.bodies.append({"status_sent": status, **body})
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{SECRET_PATH}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[_Endpoint]:
    found = _Endpoint()
    yield found
    found.close()


def _run(tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, dict]:
    trial = tmp_path / "trial"
    shutil.copytree(EXAMPLE, trial)
    output = tmp_path / "out"
    argv = ["--trial-dir", str(trial), "--rule", "VanishingGradient", "--output-dir", str(output)]
    argv += ["--webhook-url", url]
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    result = json.loads((output / RESULT_FILE_NAME).read_text(encoding="utf-8"))
    return code, capsys.readouterr().out, result


def test_each_status_change_of_a_run_is_posted(
    endpoint: _Endpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The endpoint gets InProgress then the verdict, as the result file says it, with the
    fired step, the diagnosis field and a sentence for a chat; the URL is in no output."""
    code, out, result = _run(tmp_path, endpoint.url, capsys)
    rule = result["rules"][0]
    assert code == 1 and rule["status"] == "IssuesFound"
    assert [b["status"] for b in endpoint.bodies] == ["InProgress", "IssuesFound"]
    last = endpoint.bodies[-1]
    assert last["event"] == "rule_status" and last["rule"] == "VanishingGradient"
    assert last["step"] == rule["step"] and last["fired_steps"] == rule["fired_steps"]
    assert last["details"] == rule["details"] and "diagnosis" in last
    assert last["text"].startswith(f"VanishingGradient: IssuesFound at step {rule['step']}")
    assert last["trial"] == str(tmp_path / "trial")
    written = out + (tmp_path / "out" / RESULT_FILE_NAME).read_text(encoding="utf-8")
    assert "Xy7SeCrEtKeY" not in written


def test_a_failing_endpoint_is_retried_and_never_changes_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 503 then a 200: the post is sent again; a 404 is not retried; the verdict stands."""
    monkeypatch.setattr(webhook, "FIRST_PAUSE", 0.01)
    flaky = _Endpoint(answers=[503, 404])
    try:
        code, out, _ = _run(tmp_path, flaky.url, capsys)
    finally:
        flaky.close()
    assert code == 1
    assert [(b["status"], b["status_sent"]) for b in flaky.bodies] == [
        ("InProgress", 503),
        ("InProgress", 404),
        ("IssuesFound", 200),
    ]
    assert "webhook post failed" in out and "Xy7SeCrEtKeY" not in out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_endpoint_leaves_the_verdict_and_says_where_without_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhook, "FIRST_PAUSE", 0.01)
    url = f"http://127.0.0.1:{_closed_port()}{SECRET_PATH}"
    started = time.monotonic()
    code, out, result = _run(tmp_path, url, capsys)
    assert code == 1 and result["rules"][0]["status"] == "IssuesFound"
    assert time.monotonic() - started < 30
    assert "webhook post failed" in out and "http://127.0.0.1" in out
    assert "Xy7SeCrEtKeY" not in out


def test_a_slow_endpoint_is_given_a_bounded_wait_after_the_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """wait() returns after WAIT_SECONDS however slow the endpoint; what is left is dropped
    with a warning."""
    monkeypatch.setattr(webhook, "WAIT_SECONDS", 0.5)
    slow = _Endpoint(delay=3.0)
    try:
        sink = WebhookSink(slow.url)
        for status in ("InProgress", "IssuesFound"):
            sink._send({"event": "rule_status", "rule": "R", "status": status})
        started = time.monotonic()
        sink.wait()
        assert time.monotonic() - started < 1.5
        assert sink.sent == 0
    finally:
        slow.close()


def test_the_supervisors_last_word_is_posted(endpoint: _Endpoint, tmp_path: Path) -> None:
    """A run the supervisor ends (a step over rule_step_timeout): its last word is posted."""
    output = tmp_path / "output"
    reporter = StatusReporter(["Sleeps"], output_dir=output, message_dir=None)
    reporter.start("Sleeps")
    result_fd = os.open(output, os.O_RDONLY | os.O_DIRECTORY)
    try:
        state = {
            "result_dir": str(output),
            "report": "none",
            "webhook_url": endpoint.url,
            "trial": "s3://bucket/job/debug-output",
        }
        code = conclude(
            stops=[],
            overrun=("Sleeps", 1, 2.0),
            untrusted=True,
            verdict=None,
            said_done=False,
            result_fd=result_fd,
            message_fd=None,
            wait_status=9,
            sinks=final_sinks(state, result_fd, None),
            result_dir=str(output),
        )
    finally:
        os.close(result_fd)
    (body,) = endpoint.bodies
    assert body["event"] == "run_closed" and body["exit_code"] == code
    assert body["rule"] == "Sleeps" and "rule_step_timeout" in body["details"]
    assert body["trial"] == "s3://bucket/job/debug-output"


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "hooks.slack.com/services/T0/B0/Xy7SeCrEtKeY", "http:///x"]
)
def test_a_bad_webhook_url_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        webhook_url_value({"webhook_url": url})
    text = str(caught.value)
    assert "--webhook-url" in text and "Xy7SeCrEtKeY" not in text and "/x" not in text
