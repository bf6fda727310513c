"""Run an evaluation in this process with the report listener attached, as the command does
(``container/cli.py``): the verdict line names the report, which is written after it."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from evaluator.config import load_config
from evaluator.evaluation import Evaluation
from evaluator.report import REPORT_FILE_NAME, ReportWriter
from evaluator.reporting import StatusReporter
from rules_builtin import registry

__all__ = ["ReportRun", "evaluate_with_report"]

ROOT = Path(__file__).resolve().parents[2]
HOOK_TRIALS = ROOT / "tests" / "fixtures" / "hook_trials"


@dataclass
class ReportRun:
    exit_code: int
    output_dir: Path
    report: Path | None
    log: list[dict[str, Any]]  # structlog events of the run


def evaluate_with_report(argv: Sequence[str], output_dir: Path) -> ReportRun:
    """Evaluate ``argv`` (the command's flags) writing into ``output_dir``, the report
    listener registered on the reporter."""
    config = load_config(
        [*argv, "--output-dir", str(output_dir)], {}, opt_ml_root=str(output_dir / "opt_ml")
    )
    writer = ReportWriter()
    reporter = StatusReporter.from_config(
        config,
        listeners=[writer],
        stream=io.StringIO(),
        console=False,
        report_file=output_dir / REPORT_FILE_NAME,
    )
    evaluation = Evaluation(config, reporter, threading.Event(), builtins=registry)
    with structlog.testing.capture_logs() as logs:
        try:
            evaluation.run()
            code = reporter.close()
            writer.wait()
        finally:
            evaluation.close()
    return ReportRun(code, output_dir, writer.path, logs)
