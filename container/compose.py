"""The composition of a run, in one place: configuration -> rule classes (the built-ins
handed in) -> evaluation -> sinks (``evaluator.sinks``).

``StatusReporter`` makes the sinks every run has (log, result file, message files);
``SINKS`` lists the factories of the others (the rules' actions, the report, the webhook), each called with a ``SinkContext`` and
returning its sink or None (not wanted by this run). The same factories serve the
evaluation (``evaluation_for``) and the supervisor's last word (``final_sinks``): an output
added here hears both. A new output is one module plus one ``register_sink`` (or a line in
``SINKS``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from evaluator.config import EvaluatorConfig
    from evaluator.evaluation import Evaluation, StepWatch
    from evaluator.reporting import StatusReporter
    from evaluator.sinks.events import NullSink, Sinks
    from evaluator.sources.mlflow.location import RunLocation

__all__ = [
    "SINKS",
    "SinkContext",
    "evaluation_for",
    "final_sinks",
    "register_sink",
    "reporter_for",
    "run_sinks",
]


@dataclass(frozen=True)
class SinkContext:
    """What a sink factory may look at: the run's folders, its report choice, the
    environment; ``supervisor``: the sink serves the supervisor's last word (no evaluation
    runs in that process)."""

    result_dir: Path | None
    message_dir: Path | None
    report: str | None  # "html" or "none"
    environ: Mapping[str, str]
    supervisor: bool = False
    webhook_url: str | None = None  # --webhook-url (a secret)
    trial: str | None = None  # the run's trial, for what the supervisor says of it
    mlflow_run: RunLocation | None = None  # --mlflow-write-back: the MLflow run the trial is


SinkFactory = Callable[[SinkContext], "NullSink | None"]


def report_sink(context: SinkContext) -> NullSink | None:
    """``rule_report.html`` (``--report html``, the default)."""
    if context.report != "html":
        return None
    from evaluator.sinks.report import ReportSink

    return ReportSink()


def actions_sink(context: SinkContext) -> NullSink | None:
    """The rules' actions (``action_json``), run when a firing is reported; the supervisor's
    last word hears it too, and runs none (``evaluator.sinks.actions``)."""
    from evaluator.sinks.actions import ActionsSink

    return ActionsSink()


def webhook_sink(context: SinkContext) -> NullSink | None:
    """Every status change POSTed as JSON to ``--webhook-url`` (``evaluator.sinks.webhook``),
    the supervisor's last word included."""
    if not context.webhook_url:
        return None
    from evaluator.sinks.webhook import WebhookSink

    return WebhookSink(context.webhook_url, trial=context.trial)


def mlflow_write_back_sink(context: SinkContext) -> NullSink | None:
    """Each status change as tags of the MLflow run the trial is, the result file and report
    as its artifacts (``--mlflow-write-back``: ``evaluator.sinks.mlflow_write_back``); not for
    the supervisor's last word."""
    if context.mlflow_run is None or context.supervisor or context.result_dir is None:
        return None
    from evaluator.report import REPORT_FILE_NAME
    from evaluator.sinks.mlflow_write_back import MlflowWriteBackSink
    from evaluator.status import RESULT_FILE_NAME

    files = [context.result_dir / RESULT_FILE_NAME, context.result_dir / REPORT_FILE_NAME]
    return MlflowWriteBackSink(context.mlflow_run, files=files)


# The report before the write-back: its ``wait`` finishes the report the write-back uploads.
SINKS: list[SinkFactory] = [actions_sink, report_sink, webhook_sink, mlflow_write_back_sink]


def register_sink(factory: SinkFactory) -> None:
    """One more output for every run (and the supervisor's last word) from now on."""
    SINKS.append(factory)


def run_sinks(context: SinkContext) -> list[NullSink]:
    """The sinks the registered factories make for ``context``, in their order."""
    return [sink for factory in SINKS if (sink := factory(context)) is not None]


def reporter_for(
    config: EvaluatorConfig,
    environ: Mapping[str, str],
    *,
    log_stream: TextIO,
    supervised: bool = False,
) -> tuple[StatusReporter, list[NullSink]]:
    """The run's reporter, with the registered sinks; those sinks (to ``wait`` for after the
    verdict). ``supervised``: the supervisor logs the verdict lines (a final ``rule_status``,
    ``evaluation_finished``) from the result file, so this process does not."""
    from evaluator.report import REPORT_FILE_NAME
    from evaluator.report.writer import DATA_SECONDS
    from evaluator.reporting import StatusReporter
    from evaluator.sinks.report import ReportSink
    from evaluator.status import RESULT_FILE_NAME

    webhook = config.webhook_url.get_secret_value() if config.webhook_url else None
    context = SinkContext(
        config.output_dir,
        config.message_dir,
        config.report,
        environ,
        webhook_url=webhook,
        mlflow_run=_mlflow_run(config),
    )
    sinks = run_sinks(context)
    report = next((s for s in sinks if isinstance(s, ReportSink)), None)
    reporter = StatusReporter.from_config(
        config,
        console=config.log_format == "console" and log_stream.isatty(),
        stream=log_stream,
        sinks=sinks,
        # rule_report.html beside the result file, named by the verdict line
        report_file=config.output_dir / REPORT_FILE_NAME if report is not None else None,
        verdict_lines=not supervised,
    )
    if report is not None:  # a killed evaluation's report keeps its curves
        report.keep_data_current(
            config.output_dir / RESULT_FILE_NAME,
            reporter.evidence,
            _seconds_from(environ, "EVALUATOR_REPORT_DATA_INTERVAL", DATA_SECONDS),
        )
    return reporter, sinks


def _mlflow_run(config: EvaluatorConfig) -> RunLocation | None:
    """The MLflow run to write the verdict to (``--mlflow-write-back``), None without it."""
    if not config.mlflow_write_back:
        return None
    from evaluator.sources.mlflow.location import run_of_trial

    store = config.trial_options.mlflow_tracking_uri
    return run_of_trial(config.base_trial, store.get_secret_value() if store else None)


def evaluation_for(
    config: EvaluatorConfig,
    reporter: StatusReporter,
    stop: threading.Event,
    watch: StepWatch | None,
) -> Evaluation:
    """The evaluation of ``config``'s rules, the built-in rules handed in."""
    from evaluator.evaluation import Evaluation
    from rules_builtin import registry

    return Evaluation(config, reporter, stop, builtins=registry, watch=watch)


def final_sinks(state: Mapping[str, Any], result_fd: int | None, message_fd: int | None) -> Sinks:
    """The supervisor's sinks for its last word: the message files and the result file in
    the folders it holds, then the registered ones (``state``: the child's ``outputs``
    message)."""
    import os

    from evaluator.sinks.events import Sinks
    from evaluator.sinks.message_files import MessageFilesSink
    from evaluator.sinks.result_file import ResultFileSink

    folder, messages = state.get("result_dir"), state.get("message_dir")
    context = SinkContext(
        Path(folder) if isinstance(folder, str) else None,
        Path(messages) if isinstance(messages, str) else None,
        state.get("report") if isinstance(state.get("report"), str) else None,
        dict(os.environ),
        supervisor=True,
        webhook_url=state.get("webhook_url") if isinstance(state.get("webhook_url"), str) else None,
        trial=state.get("trial") if isinstance(state.get("trial"), str) else None,
    )
    own = [MessageFilesSink(dir_fd=message_fd), ResultFileSink(dir_fd=result_fd)]
    return Sinks([*own, *run_sinks(context)])


def _seconds_from(environ: Mapping[str, str], name: str, default: float) -> float:
    """A number of seconds > 0 from the environment variable ``name``; ``default`` when it
    is unset or not such a number (a tuning knob, never an error)."""
    try:
        value = float(environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 and value < float("inf") else default
