"""LearningRateSchedule on Hugging Face-style logs: a learning rate stuck at 0 or NaN, a warm-up
that runs too long, a restart where none is expected."""

from __future__ import annotations

import math
from pathlib import Path

from tests.unit.rules_builtin.stability_logs import log, run


def _linear(n: int, warmup: int, peak: float = 1e-4) -> list[float]:
    """Linear warm-up from 0 then linear decay to 0 at the last value (as the Trainer logs)."""
    return [peak * i / warmup if i < warmup else peak * (n - 1 - i) / (n - 1 - warmup)
            for i in range(n)]  # fmt: skip


def test_a_healthy_schedule_is_quiet(tmp_path: Path) -> None:
    """A warm-up from 0 and a decay to 0 log one 0 each: quiet, every value compared."""
    result = run(log(tmp_path, {"train/learning_rate": _linear(50, 5)}), "LearningRateSchedule")
    assert result.fired == [] and not result.nothing


def test_restarts_per_cycle_are_quiet_by_default(tmp_path: Path) -> None:
    """A schedule that decays to 0 and restarts each cycle is quiet; with
    allow_restarts=false the first restart fires."""
    lr = _linear(20, 1)[1:] * 3  # three cycles, each ending at 0
    folder = log(tmp_path, {"train/learning_rate": lr})
    assert run(folder, "LearningRateSchedule").fired == []
    strict = run(folder, "LearningRateSchedule", allow_restarts="false")
    assert strict.fired[0] == 200  # the 20th value: the second cycle's first
    assert strict.checks[0].diagnosis is not None
    assert strict.checks[0].diagnosis.kind == "schedule"


def test_a_learning_rate_set_to_zero_fires_on_its_second_zero(tmp_path: Path) -> None:
    """From value 30 on the learning rate is 0: fires at value 31 (patience 2), not_learning."""
    lr = _linear(60, 5)
    lr[30:] = [0.0] * 30
    result = run(log(tmp_path, {"train/learning_rate": lr}), "LearningRateSchedule")
    assert result.fired[0] == 320
    assert result.checks[0].diagnosis is not None
    assert result.checks[0].diagnosis.kind == "not_learning"


def test_nan_learning_rate_fires_at_once(tmp_path: Path) -> None:
    """A NaN learning rate fires at its step, diverging."""
    lr = _linear(20, 2)
    lr[10] = math.nan
    result = run(log(tmp_path, {"train/learning_rate": lr}), "LearningRateSchedule")
    assert result.fired == [110]


def test_a_warm_up_longer_than_asked(tmp_path: Path) -> None:
    """With total_steps=500 and warmup_fraction 0.1 a rise after step 50 fires: a warm-up of
    10 values at steps 10..100 fires at step 60."""
    folder = log(tmp_path, {"train/learning_rate": _linear(50, 10)})
    assert run(folder, "LearningRateSchedule").fired == []
    result = run(folder, "LearningRateSchedule", total_steps="500")
    assert result.fired[0] == 60


def test_no_learning_rate_checks_nothing(tmp_path: Path) -> None:
    """A log without a learning rate ends "checked nothing"."""
    assert run(log(tmp_path, {"train/loss": [1.0, 0.5]}), "LearningRateSchedule").nothing
