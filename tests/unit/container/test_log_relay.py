"""What the supervisor passes on from the evaluation's log pipe (``container.log_relay``):
everything before rule code may run; after, verdict lines only as ``rule_output``."""

from __future__ import annotations

import json

import pytest

from container.log_relay import LogRelay
from container.output_lines import OutputLines

FORGED_STATUS = b'{"event": "rule_status", "rule": "R", "status": "NoIssuesFound"}'
FORGED_END = b'{"event": "evaluation_finished", "status": "NoIssuesFound", "exit_code": 0}'
PROGRESS = b'{"event": "rule_progress", "rule": "R", "step": 3}'
IN_PROGRESS = b'{"event": "rule_status", "rule": "R", "status": "InProgress"}'


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line]


def test_before_rule_code_every_byte_passes(capfd: pytest.CaptureFixture[str]) -> None:
    relay = LogRelay(OutputLines())
    relay.feed(b"usage: help text\n" + FORGED_STATUS + b"\n", trusted=True)
    out = capfd.readouterr().out
    assert out == "usage: help text\n" + FORGED_STATUS.decode() + "\n"


def test_after_rule_code_verdict_lines_are_rule_output(capfd: pytest.CaptureFixture[str]) -> None:
    """Verdict lines become rule_output (stream log); progress and InProgress pass
    re-serialised; text is rule_output; a line split over two reads is one line."""
    relay = LogRelay(OutputLines())
    data = b"\n".join([FORGED_STATUS, FORGED_END, PROGRESS, IN_PROGRESS, b"plain \x1b[2J text"])
    relay.feed(data[:30], trusted=False)
    relay.feed(data[30:] + b"\n", trusted=False)
    lines = _lines(capfd.readouterr().out)
    assert [line["event"] for line in lines] == [
        "rule_output",
        "rule_output",
        "rule_progress",
        "rule_status",
        "rule_output",
    ]
    assert [line.get("stream") for line in lines if line["event"] == "rule_output"] == ["log"] * 3
    assert lines[0]["text"] == FORGED_STATUS.decode()
    assert lines[3]["status"] == "InProgress"


def test_console_verdict_lines_are_rule_output(capfd: pytest.CaptureFixture[str]) -> None:
    """Console format: a line naming rule_status with a final status, or evaluation_finished,
    or a line not shaped as the renderer's (a JSON line), is rule_output; others pass with
    control characters escaped but colours and \\r."""
    lines = OutputLines()
    lines.log_format = "console"
    relay = LogRelay(lines)
    relay.feed(
        b"2026-01-01T00:00:00Z [info     ] rule_status    status='NoIssuesFound' rule='R'\n"
        b"2026-01-01T00:00:00Z [info     ] evaluation_finished status='NoIssuesFound'\n"
        b"2026-01-01T00:00:00Z [info     ] rule_status    rule=R status=InProgress\n"
        b"2026-01-01T00:00:00Z [info     ] rule_status    rule=R status=InProgress x status=Error\n"
        b"2026-01-01T00:00:00Z [info     ] \x1b[32mgreen\x1b[0m \x1b]0;title\x07 bell\n"
        + FORGED_STATUS
        + b"\n",
        trusted=False,
    )
    out = capfd.readouterr().out.splitlines()
    assert "rule_output" in out[0] and "rule_output" in out[1]
    assert "status=InProgress" in out[2] and "rule_output" not in out[2]
    assert "rule_output" in out[3]
    assert out[4] == (
        "2026-01-01T00:00:00Z [info     ] \x1b[32mgreen\x1b[0m \\x1b]0;title\\x07 bell"
    )
    assert "rule_output" in out[5] and "stream=log" in out[5]


def test_a_progress_line_before_a_log_line_is_not_its_start(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The console's progress line (\\r ... clear-line), then a log line in the same read:
    the log line is taken as the renderer's; a progress line alone is shown at once."""
    lines = OutputLines()
    lines.log_format = "console"
    relay = LogRelay(lines)
    relay.feed(b"\rR: step 3\x1b[K", trusted=False)
    assert capfd.readouterr().out == "\rR: step 3\x1b[K"
    relay.feed(
        b"\rR: step 4\x1b[K2026-01-01T00:00:00Z [info     ] rule_fired rule=R\n", trusted=False
    )
    out = capfd.readouterr().out
    assert "rule_output" not in out and out.endswith("rule_fired rule=R\n")
