"""The watch process holds no rule code (issue 41): importing the watch, shared workers'
end included, loads no rule, no evaluation and not the worker itself; and the worker's
subcommand, started by hand, says who starts it."""

from __future__ import annotations

import subprocess
import sys

from tests.support.evaluator_cli import ROOT

NEVER_IN_THE_WATCH = (
    "rules_builtin",
    "container.worker",
    "evaluator.evaluation",
    "evaluator.rules",
)


def test_importing_the_watch_loads_no_rule_code() -> None:
    """``container.watch`` (its command, live runs, fork server and workers' ends) imports
    none of the rules, the evaluation or the worker."""
    script = (
        "import sys, container.watch, container.watch.workers; "
        f"print(sorted(m for m in sys.modules if m.startswith({NEVER_IN_THE_WATCH!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_worker_started_by_hand_says_the_watch_starts_it(tmp_path: object) -> None:
    """``rule-evaluator watch-worker`` without the watch's socket as its stdin: exit 2 with a
    ClientError saying it is the watch's."""
    done = subprocess.run(
        [sys.executable, "-m", "container.cli", "watch-worker", "--folder", str(tmp_path)],
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "ClientError: watch-worker is started by rule-evaluator watch" in done.stderr
