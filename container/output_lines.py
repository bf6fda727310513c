"""What the evaluation process prints outside the log (rule code's prints), as
``rule_output`` log lines on the supervisor's stdout, and the supervisor's own log lines.
Standard library only (the supervisor imports it before the evaluator)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["OutputLines", "write_all"]

_QUIET_LEVELS = ("WARNING", "ERROR", "CRITICAL")
_LINE_LIMIT = 64 * 1024  # a longer line without a newline is passed on in pieces


class OutputLines:
    """What the child printed outside the log, as ``rule_output`` log lines on our stdout."""

    def __init__(self) -> None:
        self.log_format = "json"
        self.log_level = "INFO"
        self.buffers = {"stdout": bytearray(), "stderr": bytearray()}

    def feed(self, stream: str, data: bytes) -> None:
        buffer = self.buffers[stream]
        buffer += data
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                if len(buffer) >= _LINE_LIMIT:
                    self.rule_output(stream, bytes(buffer))
                    buffer.clear()
                return
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            self.rule_output(stream, line)

    def log(
        self,
        event: str,
        level: str,
        *,
        logger: str = "evaluator.supervisor",
        always: bool = False,
        **fields: Any,
    ) -> None:
        """One log line of the supervisor's own; an ``info`` one is left out at
        ``--log-level WARNING`` and above, unless ``always``."""
        if level == "info" and self.log_level in _QUIET_LEVELS and not always:
            return
        import json

        stamp = _timestamp()
        if self.log_format == "console":
            extra = " ".join(f"{k}={v!r}" for k, v in fields.items())
            line = f"{stamp} [{level:<9}] {event:<14} {extra}\n"
        else:
            record = {"event": event, "level": level, "logger": logger}
            line = json.dumps({**record, **fields, "timestamp": stamp}) + "\n"
        write_all(1, line.encode("utf-8", errors="backslashreplace"))

    def flush(self, stream: str) -> None:
        buffer = self.buffers[stream]
        if buffer:
            self.rule_output(stream, bytes(buffer))
            buffer.clear()

    def rule_output(self, stream: str, raw: bytes) -> None:
        """One ``rule_output`` line: ``raw``, what the child wrote on ``stream``."""
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
        write_all(1, line.encode("utf-8", errors="backslashreplace"))


def write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # stdout closed (piped into head): the status files still say everything


def _timestamp() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
