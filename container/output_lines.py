"""What the evaluation process prints outside the log (rule code's prints), as
``rule_output`` log lines on the supervisor's stdout, and the supervisor's own log lines.
Standard library only (the supervisor imports it before the evaluator)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["OutputLines"]

_LINE_LIMIT = 64 * 1024  # a longer line without a newline is passed on in pieces


class OutputLines:
    """What the child printed outside the log, as ``rule_output`` log lines on our stdout."""

    def __init__(self) -> None:
        self.log_format = "json"
        self.buffers = {"stdout": bytearray(), "stderr": bytearray()}

    def feed(self, stream: str, data: bytes) -> None:
        buffer = self.buffers[stream]
        buffer += data
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                if len(buffer) >= _LINE_LIMIT:
                    self._emit(stream, bytes(buffer))
                    buffer.clear()
                return
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            self._emit(stream, line)

    def log(self, event: str, level: str, **fields: Any) -> None:
        """One log line of the supervisor's own."""
        import json

        stamp = _timestamp()
        if self.log_format == "console":
            extra = " ".join(f"{k}={v!r}" for k, v in fields.items())
            line = f"{stamp} [{level:<9}] {event:<14} {extra}\n"
        else:
            record = {"event": event, "level": level, "logger": "evaluator.supervisor"}
            line = json.dumps({**record, **fields, "timestamp": stamp}) + "\n"
        _write_all(1, line.encode("utf-8", errors="backslashreplace"))

    def flush(self, stream: str) -> None:
        buffer = self.buffers[stream]
        if buffer:
            self._emit(stream, bytes(buffer))
            buffer.clear()

    def _emit(self, stream: str, raw: bytes) -> None:
        import json  # container.link loaded it; kept off the lines before the handlers

        text = raw.decode("utf-8", errors="backslashreplace").rstrip("\r")
        level = "warning" if stream == "stderr" else "info"
        stamp = _timestamp()
        if self.log_format == "console":
            line = f"{stamp} [{level:<9}] rule_output    stream={stream} text={text!r}\n"
        else:
            record = {
                "event": "rule_output",
                "level": level,
                "logger": "evaluator.rule_output",
                "stream": stream,
                "text": text,
                "timestamp": stamp,
            }
            line = json.dumps(record) + "\n"
        _write_all(1, line.encode("utf-8", errors="backslashreplace"))


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # stdout closed (piped into head): the status files still say everything


def _timestamp() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
