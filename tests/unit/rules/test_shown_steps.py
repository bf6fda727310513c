"""What a rule recorded, shown at the writer's steps (``evaluator.rules.shown_steps``)."""

from __future__ import annotations

from typing import Any

from evaluator.errors import RuleEvaluationConditionMet
from evaluator.modes import ModeKeys, WriterStep
from evaluator.rules.shown_steps import (
    check_shown,
    condition_words,
    logged_step,
    series_shown,
    step_words,
    writer_steps,
)


class _PhasesTrial:
    """A TensorBoard trial with phases, as far as showing steps goes."""

    maps_writer_steps = True

    def writer_step(self, step: int) -> WriterStep:
        return WriterStep(step // 2, ModeKeys.EVAL if step % 2 else ModeKeys.TRAIN)


class _SmdebugTrial:
    """A trial whose format has no ``writer_step``: global steps are shown."""

    maps_writer_steps = False

    def writer_step(self, step: int) -> WriterStep:
        return WriterStep(step)


def _series(points: list[list[Any]], firings: list[list[Any]]) -> dict[str, Any]:
    return {
        "tensors": ["loss"],
        "quantity": "loss",
        "mode": None,
        "threshold_changes": [],
        "count": len(points),
        "points": points,
        "firings": firings,
        "firing_count": len(firings),
        "closest": firings[0] if firings else None,
    }


def test_a_series_of_two_modes_becomes_one_per_mode_at_the_writer_steps() -> None:
    """Global steps 0..5 of a run with phases: TRAIN 0, 1, 2 and EVAL 0, 1, 2, each its own
    series, so no axis draws two values at one step; the firing stays with its mode."""
    points = [[g, float(g)] for g in range(6)]
    shown = series_shown([_series(points, [[5, 5.0]])], writer_steps(_PhasesTrial()))
    by_mode = {s["mode"]: s for s in shown}
    assert set(by_mode) == {"TRAIN", "EVAL"}
    assert by_mode["TRAIN"]["points"] == [[0, 0.0], [1, 2.0], [2, 4.0]]
    assert by_mode["EVAL"]["points"] == [[0, 1.0], [1, 3.0], [2, 5.0]]
    assert by_mode["EVAL"]["firings"] == [[2, 5.0]] and by_mode["TRAIN"]["firings"] == []
    assert by_mode["EVAL"]["closest"] == [2, 5.0] and by_mode["TRAIN"]["closest"] is None
    assert by_mode["EVAL"]["firing_count"] == 1 and by_mode["TRAIN"]["firing_count"] == 0


def test_an_smdebug_trial_is_shown_as_it_is() -> None:
    """A format without ``writer_step`` (smdebug's output): nothing is translated."""
    trial = _SmdebugTrial()
    assert writer_steps(trial) is None and writer_steps(object()) is None
    series = [_series([[0, 1.0], [1, 2.0]], [[1, 2.0]])]
    assert series_shown(series, writer_steps(trial)) == series
    check = {"step": 11, "mode": "TRAIN", "mode_step": 5}
    assert check_shown(check, writer_steps(trial)) == check
    assert step_words(trial, 11, ModeKeys.TRAIN, 5) == "TRAIN step 5 (global step 11)"
    assert step_words(trial, 11) == "step 11" and logged_step(trial, 11) == 11


def test_a_check_and_the_firing_line_name_the_writer_step() -> None:
    """Global step 15 of a run with phases is EVAL step 7 in a check, a sentence and the log
    line of the firing; the global step is kept beside the check to read the value again."""
    trial = _PhasesTrial()
    check = check_shown({"step": 15, "mode": "EVAL", "mode_step": 7}, writer_steps(trial))
    assert check == {"step": 7, "mode": "EVAL", "mode_step": 7, "global_step": 15}
    assert step_words(trial, 15, ModeKeys.EVAL, 7) == "EVAL step 7"
    assert logged_step(trial, 14) == 7
    words = condition_words(trial, RuleEvaluationConditionMet("ExplodingTensor", 15))
    assert words == (
        "Evaluation of the rule ExplodingTensor at step 7 (EVAL) resulted in the condition "
        "being met"
    )


def test_real_trials_show_global_steps_where_they_are_the_writers() -> None:
    """smdebug's output shows its global steps (no mapping at all); a TensorBoard run without
    phases maps, but each step to itself; a run with phase folders to its event steps."""
    from pathlib import Path

    from evaluator.trial import create_trial

    root = Path(__file__).resolve().parents[3]
    logs = root / "tests" / "fixtures" / "tb_logs"
    with create_trial(str(root / "examples" / "trials" / "vanishing_gradients")) as smdebug:
        assert not smdebug.maps_writer_steps and writer_steps(smdebug) is None
        assert smdebug.writer_step(5) == WriterStep(5)
    with create_trial(str(logs / "tf_healthy"), idle_scans_to_complete=1) as plain:
        assert plain.maps_writer_steps
        assert [plain.writer_step(s) for s in plain.steps()[:2]] == [WriterStep(0), WriterStep(1)]
    with create_trial(str(logs / "torch_overfit"), idle_scans_to_complete=1) as phases:
        assert phases.writer_step(phases.steps()[1]) == WriterStep(0, ModeKeys.EVAL)
