"""An evaluation of a live trial that stops growing sleeps: neither its rule threads nor the
thread waiting for them wake while scans find nothing new, and its ``StopEvent`` ends it at
once. Wake-ups are counted as each thread's context switches (``/proc``)."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from evaluator.config import load_config
from evaluator.engine.stop import StopEvent
from evaluator.evaluation import Evaluation
from evaluator.formats.collections_file import Collection
from evaluator.modes import ModeKeys
from evaluator.reporting import StatusReporter
from evaluator.testing import TrialWriter
from rules_builtin import registry
from tests.unit.trial.test_stop_waits import switches

pytestmark = pytest.mark.skipif(
    not Path("/proc/thread-self").exists(), reason="counts wake-ups in /proc (Linux)"
)


def test_an_idle_evaluation_sleeps_until_it_is_stopped(tmp_path: Path) -> None:
    """Two rules waiting for the next step of a trial polled about twenty times a second:
    over a second no thread of the evaluation wakes; the stop ends the run within a second,
    every rule Stopped."""
    writer = TrialWriter(tmp_path / "trial")
    writer.write_collections([Collection("weights", include_regex=["^w"])])
    for step in (0, 1):
        writer.write_step(step, {"w": np.ones((2, 2), np.float32)}, mode=ModeKeys.TRAIN)
    config = load_config(
        ["--trial-dir", str(tmp_path / "trial"), "--rule", "AllZero,ExplodingTensor",
         "--collection_names", "weights", "--wait_for_training_end", "true", "--poll-interval", "0.02",
         "--output-dir", str(tmp_path / "out")],
        {"EVALUATOR_MAX_POLL_INTERVAL": "0.05"},
        opt_ml_root=str(tmp_path / "opt_ml"),
    )  # fmt: skip
    reporter = StatusReporter.from_config(config, stream=io.StringIO(), console=False)
    stop = StopEvent()
    evaluation = Evaluation(config, reporter, stop, builtins=registry)
    runner = threading.Thread(target=evaluation.run, name="evaluation")
    runner.start()
    try:
        deadline = time.monotonic() + 30
        while not _waiting(reporter) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # both rules past steps 0 and 1, waiting for the next
        threads = [runner, *(t for t in threading.enumerate() if t.name.startswith("rule-"))]
        before = [switches(t) for t in threads]
        time.sleep(1.0)
        woke = {t.name: switches(t) - b for t, b in zip(threads, before, strict=True)}
        stopped = time.monotonic()
        stop.set()
        runner.join(timeout=10)
        took = time.monotonic() - stopped
    finally:
        stop.set()
        runner.join(timeout=10)
        evaluation.close()
    assert woke == {"evaluation": 0, "rule-AllZero": 0, "rule-ExplodingTensor": 0}
    assert not runner.is_alive() and took < 1.0
    reporter.stop(15)
    assert {o.status.value for o in reporter.outcomes} == {"Stopped"}


def _waiting(reporter: StatusReporter) -> bool:
    """Whether both rules have judged step 1 (so wait for the next)."""
    states = reporter._rules.values()
    return len(states) == 2 and all(state.last_step == 1 for state in states)
