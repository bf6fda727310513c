"""``--mlflow-write-back``: the verdict written into the MLflow run the trial is.

Each rule status change sets tags of the run, ``rule_evaluator.<configuration name>.<field>``:
``status``, ``exit_code``, ``fired_step`` (the first firing's step as the result file shows
it: MLflow's own step, docs/compatibility.md "Steps users see"; ``fired_steps`` when it
continued after firing), ``step`` (the last step evaluated), ``diagnosis`` (the first
firing's) and ``details`` (the status text, cut to ``MAX_TAG`` characters); and, once the
verdict is out, the result file and the rule report are logged as artifacts of the run under
``rule_evaluator/``. MLflow's client does the writing (``evaluator.sources.mlflow.client``).

Nothing here delays or changes the verdict: the writes go out from a thread of their own; the
artifacts after the verdict, given ``WAIT_SECONDS`` at most (``wait``); a failure is logged (the
store named without credentials), never raised.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import structlog

from evaluator.sinks.events import EvaluationEnded, NullSink, StatusChanged
from evaluator.sources.mlflow.client import mlflow_client
from evaluator.sources.mlflow.location import RunLocation, shown_uri
from evaluator.status.files import rule_document

__all__ = ["ARTIFACT_FOLDER", "MAX_TAG", "TAG_PREFIX", "WAIT_SECONDS", "MlflowWriteBackSink"]

TAG_PREFIX = "rule_evaluator"
ARTIFACT_FOLDER = "rule_evaluator"
MAX_TAG = 5000  # characters of a tag's value (MLflow's own limit is 8000)
WAIT_SECONDS = 30.0  # after the verdict, for the writes still queued
_STOP = object()
_log = structlog.get_logger("evaluator.sinks.mlflow")


class MlflowWriteBackSink(NullSink):
    """Writes each status change as tags, and the outputs as artifacts, of ``run``."""

    def __init__(self, run: RunLocation, *, files: list[Path]) -> None:
        self.run = run
        self._files = files  # written as artifacts once the verdict is out (those that exist)
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.written = 0  # writes MLflow accepted
        self.failed = 0

    def status_changed(self, event: StatusChanged) -> None:
        self._put(("tags", rule_tags(rule_document(event.rule))))

    def evaluation_ended(self, event: EvaluationEnded) -> None:
        return None  # the artifacts go in ``wait``: the report is drawn after the verdict

    def wait(self) -> None:
        """Log the outputs as artifacts, then give the writes ``WAIT_SECONDS`` at most."""
        self._put(("artifacts", self._files))
        self._queue.put(_STOP)
        thread = self._thread
        if thread is None:
            return
        thread.join(WAIT_SECONDS)
        if thread.is_alive():
            _log.warning(
                "mlflow write-back unfinished",
                run=self.run.shown,
                queued=self._queue.qsize(),
                waited=WAIT_SECONDS,
            )

    def _put(self, item: Any) -> None:
        self._queue.put(item)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._write, name="mlflow-write-back", daemon=True
                )
                self._thread.start()

    def _write(self) -> None:
        client = None
        while (item := self._queue.get()) is not _STOP:
            what, payload = item
            try:
                client = client or mlflow_client(self.run.tracking_uri)
                if what == "tags":
                    _set_tags(client, self.run.run_id, payload)
                else:
                    _log_artifacts(client, self.run.run_id, payload)
                self.written += 1
            except Exception as e:  # a write-back must never change the verdict
                self.failed += 1
                _log.warning(
                    "mlflow write-back failed",
                    run=self.run.shown,
                    what=what,
                    error=type(e).__name__,
                    detail=_first_line(e, self.run.tracking_uri),
                )


def rule_tags(document: dict[str, Any]) -> dict[str, str]:
    """The tags of one rule's entry of the result file (see the module docstring)."""
    prefix = f"{TAG_PREFIX}.{document['configuration_name']}"
    fired = document.get("fired_steps") or []
    reasons = (document.get("evidence") or {}).get("reasons") or [{}]
    found = {
        "status": document.get("status"),
        "exit_code": document.get("exit_code"),
        "step": document.get("step"),
        "fired_step": fired[0] if fired else None,
        "fired_steps": ",".join(map(str, fired)) if len(fired) > 1 else None,
        "diagnosis": reasons[0].get("diagnosis"),
        "details": document.get("details"),
    }
    return {f"{prefix}.{k}": str(v)[:MAX_TAG] for k, v in found.items() if v is not None}


def _set_tags(client: Any, run_id: str, tags: dict[str, str]) -> None:
    from mlflow.entities import RunTag

    client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def _log_artifacts(client: Any, run_id: str, files: list[Path]) -> None:
    for path in files:
        if path.is_file():
            client.log_artifact(run_id, str(path), artifact_path=ARTIFACT_FOLDER)


def _first_line(error: Exception, tracking_uri: str) -> str:
    text = str(error).replace(tracking_uri, shown_uri(tracking_uri)).strip()
    return text.splitlines()[0][:300] if text else ""
