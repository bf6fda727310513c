"""``configure_logging``: structlog and stdlib logging through one handler on stdout, JSON lines
or the console rendering. The AWS and HTTP libraries never log below INFO, and only their
warnings pass unless the level is DEBUG; the verdict (``VERDICT_LOGGER``) passes at every
level."""

from __future__ import annotations

import logging
import sys
import weakref
from typing import Any, TextIO

import structlog

from evaluator.redaction import escape_controls

__all__ = ["VERDICT_LOGGER", "configure_logging"]

# The run's final line is the verdict, not debug output: it passes whatever the level.
VERDICT_LOGGER = "evaluator.verdict"

# At DEBUG botocore logs request headers, credentials included: never below INFO.
_CLAMPED_LOGGERS = ("botocore", "aiobotocore", "boto3", "urllib3", "s3transfer")


class _ClampFilter(logging.Filter):
    """Drops records below INFO from the AWS/HTTP libraries, whatever their level was set to."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        return not any(
            record.name == n or record.name.startswith(n + ".") for n in _CLAMPED_LOGGERS
        )


def _escape_controls(logger: Any, name: str, event: dict[str, Any]) -> dict[str, Any]:
    """For the console: control characters in any text (a tensor or rule name, a message, an
    exception) are shown as ``\\xNN``, so nothing a trial or rule holds can drive the terminal.
    The JSON lines escape them already."""
    clean: dict[str, Any] = {}
    for key, value in event.items():
        if isinstance(value, str):
            value = escape_controls(value)
        elif isinstance(value, list | tuple | dict | set):
            value = (
                escape_controls(repr(value))
                if escape_controls(repr(value)) != repr(value)
                else value
            )
        elif isinstance(value, BaseException):
            value = escape_controls(f"{type(value).__name__}: {value}")
        clean[escape_controls(key) if isinstance(key, str) else key] = value
    return clean


_SETTINGS: weakref.WeakKeyDictionary[logging.Handler, tuple[int, str, int]] = (
    weakref.WeakKeyDictionary()
)  # what each handler installed here was made for


def _installed(numeric: int, log_format: str, stream: TextIO) -> logging.Handler | None:
    """The handler installed for exactly these settings, when it is still the root's."""
    root = logging.getLogger()
    for handler in root.handlers:
        if handler.get_name() == "evaluator" and _SETTINGS.get(handler) == (
            numeric,
            log_format,
            id(stream),
        ):
            return handler if root.level == numeric else None
    return None


def configure_logging(
    *, level: str | int = "INFO", log_format: str = "json", stream: TextIO | None = None
) -> logging.Handler:
    """Route structlog and stdlib logging through one handler on ``stream`` (stdout): one JSON
    object per line, or structlog's console rendering. Replaces the handler an earlier call
    installed. botocore, aiobotocore, boto3, urllib3 and s3transfer never log below
    INFO, and below WARNING only at DEBUG ("Found credentials in environment variables" is not news).
    ``VERDICT_LOGGER`` logs at INFO whatever ``level`` is. Asked again for the same level,
    format and stream, the installed handler stays (the runs of a shared worker each ask,
    and a record logged meanwhile by another run must not fall between two handlers)."""
    numeric = level if isinstance(level, int) else logging.getLevelName(str(level).upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    stream = stream if stream is not None else sys.stdout
    same = _installed(numeric, log_format, stream)
    if same is not None:
        return same
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    if hasattr(stream, "reconfigure"):  # never die printing a value that is not valid UTF-8
        stream.reconfigure(errors="backslashreplace")
    renderer: list[Any] = (
        [
            structlog.processors.format_exc_info,
            _escape_controls,
            structlog.dev.ConsoleRenderer(colors=stream.isatty()),
        ]
        if log_format == "console"
        else [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
        )
    )
    handler.addFilter(_ClampFilter())
    handler.set_name("evaluator")
    _SETTINGS[handler] = (numeric, log_format, id(stream))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "evaluator"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    library_level = logging.INFO if numeric <= logging.DEBUG else max(numeric, logging.WARNING)
    for name in _CLAMPED_LOGGERS:
        logging.getLogger(name).setLevel(library_level)
    logging.getLogger(VERDICT_LOGGER).setLevel(logging.INFO)
    return handler
