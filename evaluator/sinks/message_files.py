"""The message files sink: ``message`` and ``failure`` (``/opt/ml/output`` on SageMaker), the
text SageMaker shows as the rule's StatusDetails, written once the verdict is recorded, or by
the supervisor's last word into the folder it opened before rule code could run."""

from __future__ import annotations

from pathlib import Path

from evaluator.sinks.events import EvaluationEnded, NullSink, RunClosed
from evaluator.status.files import write_status_files, write_status_files_at

__all__ = ["MessageFilesSink"]


class MessageFilesSink(NullSink):
    """The message files in ``message_dir`` (when it exists and is writable), or in the held
    folder ``dir_fd``; None of both: no files."""

    essential = True

    def __init__(self, message_dir: Path | None = None, *, dir_fd: int | None = None) -> None:
        self._message_dir = message_dir
        self._dir_fd = dir_fd

    def evaluation_ending(self, event: EvaluationEnded) -> None:
        if event.verdict.message is not None and self._message_dir is not None:
            write_status_files(self._message_dir, event.verdict.message)

    def run_closed(self, event: RunClosed) -> None:
        if self._dir_fd is not None:
            write_status_files_at(self._dir_fd, event.text)
