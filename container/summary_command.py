"""``rule-evaluator summary PATH``: print what a trial holds, for the trial kinds a run takes:
smdebug's output, a TensorBoard run, and a folder holding several (found as ``batch`` and
``watch`` find them: ``container.discovery``), each summarised under its path there; with
``--tensorboard-run NAME``, that run of the folder only, as a run reads it; an MLflow run
(``runs:/<run_id>`` with ``--mlflow-tracking-uri`` or ``MLFLOW_TRACKING_URI``, or a file
store's run folder)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from container.discovery import Run, RunFinder
from container.suggest import SuggestingParser
from evaluator.errors import ClientError, ExitCode, SMDebugError

__all__ = ["main"]

_FLAGS = {
    "collection_wait_timeout": "--collection-wait-timeout",
    "mlflow_tracking_uri": "--mlflow-tracking-uri",
    "tensorboard_run": "--tensorboard-run",
    "trial_format": "--trial-format",
}


def _parser() -> SuggestingParser:
    parser = SuggestingParser(
        prog="rule-evaluator summary",
        description=(
            "Print what a trial holds: smdebug's output, a TensorBoard run, or each trial of a "
            "folder that holds several (named by its path there)."
        ),
    )
    parser.add_argument(
        "path",
        help="a training job's debug output, a TensorBoard run, or a folder of them: a folder "
        "or s3://bucket/prefix",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--collection-wait-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for collection files (default 600)",
    )
    parser.add_argument(
        "--tensorboard-run",
        metavar="NAME",
        help="the run of a folder of TensorBoard runs to summarise, as a run reads it",
    )
    parser.add_argument(
        "--trial-format", metavar="FORMAT", help="smdebug, tensorboard or auto (the default)"
    )
    parser.add_argument(
        "--mlflow-tracking-uri",
        metavar="URI",
        help="the MLflow tracking store of a runs:/<run_id> PATH (default: MLFLOW_TRACKING_URI)",
    )
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    from evaluator.config import trial_options_from_env
    from evaluator.sources import location_format
    from evaluator.storage.local import check_local_folder
    from evaluator.summary import format_summary

    given = {k: getattr(args, k) for k in _FLAGS if getattr(args, k) is not None}
    labels = {k: _FLAGS[k] for k in given}
    store = os.environ.get("MLFLOW_TRACKING_URI")
    if store and "mlflow_tracking_uri" not in given:  # MLflow's own variable
        given["mlflow_tracking_uri"], labels["mlflow_tracking_uri"] = store, "MLFLOW_TRACKING_URI"
    try:
        options = trial_options_from_env(os.environ, labels=labels, **given)
        if location_format(args.path) is not None:  # an MLflow run: no folder to look into
            runs = [Run("", args.path)]
        else:
            check_local_folder(args.path, "summary PATH")  # a missing folder fails at once
            runs = [Run("", args.path)] if options.tensorboard_run else _runs(args.path)
        found = {run.name: _summary(run.location, options) for run in runs}
    except (ClientError, SMDebugError) as e:
        print(f"ClientError: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    if len(found) == 1 and "" in found:
        summary = found[""]
        print(json.dumps(summary.to_dict(), indent=2) if args.json else format_summary(summary))
    elif args.json:
        print(json.dumps({"runs": {n: s.to_dict() for n, s in found.items()}}, indent=2))
    else:
        print(f"{len(found)} trials in {args.path}")
        for name, summary in found.items():
            print(f"\n== {name}\n{format_summary(summary)}")
    return 0


def _runs(path: str) -> list[Run]:
    """Each trial ``path`` holds, named by its path there, when it holds several; else
    ``path`` itself (a folder holding one smdebug trial is refused naming it, as the run
    refuses it; opening a folder with none says what is missing)."""
    from evaluator.sources.smdebug.parent import check_not_a_parent

    found = RunFinder(path).find().runs
    if len(found) > 1:
        return found
    check_not_a_parent(path, "summary PATH")
    return [Run("", path)]


def _summary(location: str, options: Any) -> Any:
    from evaluator.summary import summarize
    from evaluator.trial import create_trial

    with create_trial(location, options=options) as trial:
        return summarize(trial)
