"""Lines on the supervisor's control pipe are bounded (issue 40): a line without a newline
cannot grow the supervisor past ``MESSAGE_LIMIT`` plus one read (before: 4 GiB without a
newline grew it without bound), and the rest of such a line never parses as a message. The
step watch's heartbeat comes as often as the step limit needs, and never while rules work."""

from __future__ import annotations

import json
import time
from typing import Any

from container.link import MESSAGE_LIMIT, StepWatch, parse_messages

READ = 65536  # what the supervisor reads at once


def test_a_line_without_a_newline_is_dropped_as_it_comes() -> None:
    buffer = bytearray()
    largest = 0
    chunk = b"x" * READ
    for _ in range(64 * MESSAGE_LIMIT // READ):  # 64 MiB, no newline
        buffer += chunk
        assert parse_messages(buffer) == []
        largest = max(largest, len(buffer))
    assert largest <= MESSAGE_LIMIT + READ
    # the end of the dropped line, forged to look like a message, is dropped with it
    buffer += json.dumps({"m": "verdict", "code": 0}).encode() + b"\n"
    buffer += json.dumps({"m": "done"}).encode() + b"\n"
    assert parse_messages(buffer) == [{"m": "done"}]
    assert buffer == b""


def test_messages_within_the_limit_are_parsed_in_order() -> None:
    long_text = "y" * (MESSAGE_LIMIT // 2)
    lines = [{"m": "step", "rule": "R", "step": 3}, {"m": "log", "text": long_text}]
    buffer = bytearray(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    assert parse_messages(buffer) == lines


class _Link:
    """A control pipe that keeps what is sent, with the time."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, str, dict[str, Any]]] = []

    def send(self, message: str, **fields: Any) -> None:
        self.sent.append((time.monotonic(), message, fields))


def test_the_heartbeat_comes_every_half_step_limit_and_only_while_a_rule_waits() -> None:
    """With rule_step_timeout 1.6 s an idle rule's ``wait`` comes every 0.8 s (not every
    0.5 s); while the rule works on a step there is none."""
    link = _Link()
    watch = StepWatch(link, 1.6)  # type: ignore[arg-type]
    watch.begin("R", 0)
    time.sleep(1.0)
    assert [m for _, m, _ in link.sent] == ["step"]
    watch.end("R")
    time.sleep(2.0)
    waits = [t for t, m, _ in link.sent if m == "wait"]
    assert 1 <= len(waits) <= 3
    assert all(b - a > 0.7 for a, b in zip(waits, waits[1:], strict=False))
    assert watch.every == 0.8 and StepWatch(link, None).every == StepWatch.HEARTBEAT  # type: ignore[arg-type]
