"""Lines on the supervisor's control pipe are bounded (issue 40): a line without a newline
cannot grow the supervisor past ``MESSAGE_LIMIT`` plus one read (before: 4 GiB without a
newline grew it without bound), and the rest of such a line never parses as a message."""

from __future__ import annotations

import json

from container.link import MESSAGE_LIMIT, parse_messages

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
