"""What the supervisor passes on from the evaluation's log pipe (``container.link``): the
supervisor is the log's only writer.

Until rule code may run (``untrusted`` not said yet), every byte there is the evaluator's and is
passed on as it came. From then on rule code may have written any of it: it shares the
evaluation's process, its descriptors and the evaluator's own logger. So:

* a verdict line (``evaluation_finished``, or a ``rule_status`` with a status other than
  ``InProgress``) is never passed on: it becomes a ``rule_output`` line (``stream`` ``log``),
  escaped, and the supervisor logs the run's verdict lines itself from the result file once
  every process of the run is dead (``container.verdict_lines``); the evaluator, supervised,
  does not log them;
* JSON format: any other JSON object naming an ``event`` is passed on re-serialised (one line,
  escaped as JSON escapes); anything else is a ``rule_output`` line;
* console format: any other line shaped as the console renderer writes them (a time, the
  level in brackets, the event) passes with every control character shown as ``\\xNN`` but
  the carriage return and the renderer's colour and clear-line sequences; anything else is a
  ``rule_output`` line.

Standard library only (the supervisor imports it before the evaluator).
"""

from __future__ import annotations

import json
import re
from typing import Any

from container.output_lines import OutputLines, write_all

__all__ = ["LogRelay"]

_VERDICT_EVENTS = ("rule_status", "evaluation_finished")
_LINE_LIMIT = 1 << 20  # a longer line without a newline is passed on in pieces
_ANSI = re.compile(rb"\x1b\[[0-9;]*[mK]")
_REDRAW = re.compile(rb"\r|\x1b\[K")
_CONTROLS = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
_CONSOLE_EVENT = re.compile(r"^\S+ \[[^\]]*\] +(\S+)")
_CONSOLE_STATUS = re.compile(r"(?:^|\s)status=(\S+)")


class LogRelay:
    """The log pipe's bytes, on their way to our stdout."""

    def __init__(self, lines: OutputLines) -> None:
        self.lines = lines
        self.buffer = bytearray()

    def feed(self, data: bytes, *, trusted: bool) -> None:
        if trusted and not self.buffer:
            write_all(1, data)
            return
        self.buffer += data
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                break
            line = bytes(self.buffer[:end])
            del self.buffer[: end + 1]
            self._line(line, trusted)
        if self.buffer.startswith(b"\r") or len(self.buffer) >= _LINE_LIMIT:
            self._partial(trusted)

    def flush(self, *, trusted: bool) -> None:
        if self.buffer:
            line = bytes(self.buffer)
            self.buffer.clear()
            self._line(line, trusted)

    def _line(self, raw: bytes, trusted: bool) -> None:
        if trusted:
            write_all(1, raw + b"\n")
        elif self.lines.log_format == "console":
            self._console_line(raw)
        else:
            self._json_line(raw)

    def _partial(self, trusted: bool) -> None:
        """The console's progress line (``\\r`` ..., no newline): shown now, unless it may be
        the start of a log line."""
        if len(self.buffer) < _LINE_LIMIT and _CONSOLE_EVENT.match(_last_part(self.buffer)):
            return  # wait for its newline
        raw = bytes(self.buffer)
        self.buffer.clear()
        write_all(1, raw if trusted else _escaped(raw))

    def _json_line(self, raw: bytes) -> None:
        try:
            record: Any = json.loads(raw)
        except ValueError:
            record = None
        if not isinstance(record, dict) or not isinstance(record.get("event"), str):
            self.lines.rule_output("log", raw)
        elif _is_verdict(record.get("event"), record.get("status")):
            self.lines.rule_output("log", raw)
        else:
            line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
            write_all(1, line.encode("utf-8", errors="backslashreplace"))

    def _console_line(self, raw: bytes) -> None:
        last = _last_part(raw)
        found = _CONSOLE_EVENT.match(last)
        statuses = {value.strip("'\"") for value in _CONSOLE_STATUS.findall(last)}
        status = statuses.pop() if len(statuses) == 1 else None  # two: not one we can take
        if not found or _is_verdict(found.group(1), status):  # not the renderer's, or a verdict
            self.lines.rule_output("log", raw)
        else:
            write_all(1, _escaped(raw) + b"\n")


def _is_verdict(event: object, status: object) -> bool:
    return event == "evaluation_finished" or (event == "rule_status" and status != "InProgress")


def _last_part(raw: bytes | bytearray) -> str:
    """What follows the last ``\\r`` or clear-line (a progress line drawn before it), without
    colours: the log line, if it is one."""
    return _text(_ANSI.sub(b"", _REDRAW.split(bytes(raw))[-1]))


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="backslashreplace")


def _escaped(raw: bytes) -> bytes:
    """Control characters as ``\\xNN``, but ``\\r``, tab and the renderer's colour and
    clear-line sequences."""
    parts = []
    last = 0
    for found in _ANSI.finditer(raw):
        parts.append(_CONTROLS.sub(_hex, raw[last : found.start()]))
        parts.append(found.group(0))
        last = found.end()
    parts.append(_CONTROLS.sub(_hex, raw[last:]))
    return b"".join(parts)


def _hex(found: re.Match[bytes]) -> bytes:
    char = found.group(0)
    return char if char in (b"\r", b"\t") else b"\\x%02x" % char[0]
