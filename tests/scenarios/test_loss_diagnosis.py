"""Labelled training runs, one per diagnosis, and the project's own trial sets: every firing
of LossNotDecreasing, Overtraining and Overfit says what the loss did, none on a faulty run
says ``converged``, and with ``ignore_converged`` a run that simply converged ends quiet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.rules.diagnosis import KINDS, MIN_FALL
from evaluator.rules.loader import build_rule
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from rules_builtin import registry
from tests.hook_trials.outcomes import CONVERGED_MISFIRES, KNOWN_MISFIRES
from tests.hook_trials.outcomes import ROOT as HOOK_ROOT
from tests.hook_trials.outcomes import TRIALS as HOOK_TRIALS
from tests.scenarios.training import SCENARIOS, Scenario, train

RULES = ("LossNotDecreasing", "Overtraining", "Overfit")
NO_PREDICTIONS = 10**9  # these runs need no labels or predictions

# name -> (run, its diagnosis)
LABELLED = {
    "converged": (
        Scenario(
            "converged",
            train_samples=2048,
            steps=300,
            eval_every=10,
            predictions_from=NO_PREDICTIONS,
            notes="the healthy run trained 300 steps: the loss falls 98 % and flattens",
        ),
        "converged",
    ),
    "not_learning": (SCENARIOS["lr_zero"], "not_learning"),
    "diverging": (SCENARIOS["exploding"], "diverging"),
    "oscillating": (
        Scenario(
            "oscillating",
            train_samples=2048,
            steps=150,
            lr=12.0,
            eval_every=10,
            predictions_from=NO_PREDICTIONS,
            notes="learning rate 12: the loss jumps between 1 and 5 with no trend",
        ),
        "oscillating",
    ),
    "overfitting": (SCENARIOS["overfit"], "overfitting"),
}


def _firings(trial: Any, rule: str, **params: str) -> tuple[list[dict[str, Any]], Any]:
    """Every firing reason of ``rule`` run to the end of ``trial``, and its evidence."""
    instance = build_rule(registry.lookup(rule), trial, dict(params))
    result = invoke_rule(instance, raise_eval_cond=False, continue_after_fire=True)
    summary = instance.evidence.summary()
    return summary["reasons"], (result, summary)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("labelled")
    return {name: train(run, root / name) for name, (run, _) in LABELLED.items()}


@pytest.mark.parametrize("name", list(LABELLED))
def test_a_labelled_run_is_diagnosed_as_labelled(runs: dict[str, Path], name: str) -> None:
    """Each rule's first firing on a labelled run names the run's label, and every firing
    carries a known diagnosis with its figures and words."""
    label = LABELLED[name][1]
    trial = create_trial(str(runs[name]))
    fired_any = False
    for rule in RULES:
        reasons, _ = _firings(trial, rule)
        for reason in reasons:
            assert reason["diagnosis"] in KINDS
            assert reason["explanation"] in reason["sentence"]
            assert "fall_percent" in reason["diagnosis_figures"] or label == "diverging"
        if reasons:
            fired_any = True
            assert reasons[0]["diagnosis"] == label, (rule, reasons[0]["sentence"])
    assert fired_any


@pytest.mark.parametrize("name", [n for n in LABELLED if n != "converged"])
def test_no_firing_on_a_faulty_run_says_converged(runs: dict[str, Path], name: str) -> None:
    """No firing on a faulty labelled run is diagnosed converged."""
    trial = create_trial(str(runs[name]))
    for rule in RULES:
        reasons, _ = _firings(trial, rule)
        assert [r["sentence"] for r in reasons if r["diagnosis"] == "converged"] == []


def test_a_converged_run_with_ignore_converged_ends_quiet(runs: dict[str, Path]) -> None:
    """On the converged run every firing is 'converged' and, with ignore_converged=true, the
    three rules fire nothing and keep the firings as notes."""
    trial = create_trial(str(runs["converged"]))
    for rule in RULES:
        reasons, (_, loud) = _firings(trial, rule)
        assert {r["diagnosis"] for r in reasons} <= {"converged"}, rule
        quiet, (result, summary) = _firings(trial, rule, ignore_converged="true")
        assert quiet == [] and result.fired_steps == (), rule
        assert summary.get("note_count", 0) == loud["firings"]
        assert all(n["note"] and n["diagnosis"] == "converged" for n in summary.get("notes", []))


def test_ignore_converged_still_fires_on_a_faulty_run(runs: dict[str, Path]) -> None:
    """ignore_converged never silences a firing with another diagnosis."""
    trial = create_trial(str(runs["not_learning"]))
    reasons, _ = _firings(trial, "LossNotDecreasing", ignore_converged="true")
    assert reasons and reasons[0]["diagnosis"] == "not_learning"


# Faults in the loss itself: a firing there never says converged, whatever the curve did.
LOSS_FAULTS = ("overfit", "nan", "exploding", "flat_loss", "stalled")


def _loss_fell_beyond_its_noise(reason: dict[str, Any]) -> bool:
    """Whether a firing's own figures show a fall beyond the noise (what ``converged`` means:
    evaluator.rules.diagnosis): more than two noise widths and more than MIN_FALL."""
    figures = reason["diagnosis_figures"]
    fall, noise = figures["fall_percent"], figures["noise_percent"]
    return fall > max(2 * noise, 100 * MIN_FALL)


def _misfires(name: str) -> list[pytest.MarkDecorator]:
    """xfail(strict) where a loss rule another change owns misfires on a healthy trial."""
    why = [
        v
        for (t, r), v in KNOWN_MISFIRES.items()
        if t == name and r in RULES and (t, r) not in CONVERGED_MISFIRES
    ]
    healthy = name.endswith("_healthy")
    return [pytest.mark.xfail(strict=True, reason="; ".join(why))] if why and healthy else []


@pytest.mark.parametrize("name", [pytest.param(n, marks=_misfires(n)) for n in HOOK_TRIALS])
def test_real_hook_trials_never_say_converged_on_a_fault(name: str) -> None:
    """On trials written by the real hooks, every loss-progress firing carries a diagnosis; on
    a healthy one any firing says converged; on a trial whose fault is in its loss (overfit,
    NaN, exploding, a loss flat from its start) none does; on a trial whose fault is in a
    layer (saturated, vanishing, dead units: their own rules find it), a converged firing's
    figures show the fall beyond the noise that converged means."""
    trial = create_trial(str(HOOK_ROOT / name))
    try:
        for rule in RULES:
            reasons, _ = _firings(trial, rule)
            kinds = {r["diagnosis"] for r in reasons}
            assert kinds <= set(KINDS)
            if name.endswith("_healthy"):
                assert kinds <= {"converged"}, (rule, kinds)
            elif any(word in name for word in LOSS_FAULTS):
                assert "converged" not in kinds, (rule, [r["sentence"] for r in reasons])
            else:
                converged = [r for r in reasons if r["diagnosis"] == "converged"]
                assert all(_loss_fell_beyond_its_noise(r) for r in converged), (rule, converged)
    finally:
        trial.close()


def test_the_imbalanced_run_still_fails_a_gate_on_overfit(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """The imbalanced run's fault is in its labels (ClassImbalance finds it), not in its loss,
    which does converge; its validation loss falls to its lowest at the end (0.062 -> 0.021):
    Overfit is quiet by default. As AWS reads it (noise_aware=false: a pass not 1 % below the
    best counts), Overfit fires with a gap it calls overfitting, so a gate with
    ignore_converged still fails."""
    trial = create_trial(str(train(SCENARIOS["imbalanced"], tmp_path / "imbalanced")))
    reasons, _ = _firings(trial, "Overfit", ignore_converged="true")
    assert reasons == []
    reasons, _ = _firings(trial, "Overfit", ignore_converged="true", noise_aware="false")
    assert reasons and {r["diagnosis"] for r in reasons} == {"overfitting"}


# imbalanced: see the test above
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != "imbalanced"])
def test_scenario_trials_never_say_converged_on_a_fault(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    """On the project's scenario runs no loss-progress firing on a faulty run says converged,
    and any firing on the healthy run does."""
    trial = create_trial(str(train(SCENARIOS[name], tmp_path_factory.mktemp(name) / name)))
    for rule in RULES:
        kinds = {r["diagnosis"] for r in _firings(trial, rule)[0]}
        assert kinds <= ({"converged"} if name == "healthy" else set(KINDS) - {"converged"})


def test_the_command_keeps_converged_firings_as_notes(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Run as a user runs it on the converged run: without ignore_converged the rule_fired line,
    the result and the report say 'converged'; with it, NoIssuesFound (exit 0), rule_note
    lines and the notes in the result file and the report."""
    from tests.support.evaluator_cli import EvaluatorCli

    trial = str(runs["converged"])
    loud = EvaluatorCli(tmp_path / "loud")("--trial-dir", trial, "--rule", "LossNotDecreasing")
    assert loud.returncode == 1, loud.describe()
    fired = [line for line in loud.log_lines if line.get("event") == "rule_fired"]
    assert fired and set(fired[0]["diagnosis"]) == {"converged"}, loud.describe()
    assert loud.result is not None
    assert loud.result["evidence"]["reasons"][0]["diagnosis"] == "converged"
    quiet = EvaluatorCli(tmp_path / "quiet")(
        "--trial-dir", trial, "--rule", "LossNotDecreasing", "--ignore_converged", "true"
    )
    assert quiet.returncode == 0, quiet.describe()
    notes = [line for line in quiet.log_lines if line.get("event") == "rule_note"]
    assert notes and set(notes[0]["diagnosis"]) == {"converged"}, quiet.describe()
    assert quiet.result is not None and quiet.result["status"] == "NoIssuesFound"
    assert quiet.result["evidence"]["note_count"] >= 1
    assert quiet.result["evidence"]["notes"][0]["note"] is True
    assert "Diagnosis: converged" in (loud.output_dir / "rule_report.html").read_text()
    assert "Notes (" in (quiet.output_dir / "rule_report.html").read_text()


def _write_keras_converged(root: Path, *, epochs: int = 30, batches: int = 16) -> Path:
    """A run laid out as smdebug's KerasHook writes ``fit(validation_data=...)``: per-step
    running means of ``loss`` that reset every epoch, and at each epoch end the training
    epoch mean as ``loss`` and the validation mean as ``val_loss``; both fall 92 % and
    flatten (validation as high as training, noise 5 %)."""
    writer = TrialWriter(root)
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    rng = np.random.default_rng(0)
    step, counters = 0, {ModeKeys.TRAIN: 0, ModeKeys.EVAL: 0}
    for epoch in range(epochs):
        batch = []
        for b in range(batches):
            level = 0.08 + np.exp(-(epoch + b / batches) / 2.0)
            batch.append(level * (1 + 0.05 * rng.normal()))
            mode_step = counters[ModeKeys.TRAIN]
            writer.write_step(
                step, {"loss": np.float32(np.mean(batch))}, mode=ModeKeys.TRAIN, mode_step=mode_step
            )
            step, counters[ModeKeys.TRAIN] = step + 1, mode_step + 1
        train_mean = float(np.mean(batch))
        val = []
        for v in range(4):
            val.append(train_mean * (1 + 0.05 * rng.normal()))
            with writer.step_writer(step) as w:
                kw: dict[str, Any] = {"mode": ModeKeys.EVAL, "mode_step": counters[ModeKeys.EVAL]}
                w.write_tensor(np.float32(np.mean(val)), "loss", **kw)
                if v == 3:  # the epoch-end logs
                    w.write_tensor(np.float32(train_mean), "loss", **kw)
                    w.write_tensor(np.float32(np.mean(val)), "val_loss", **kw)
            step, counters[ModeKeys.EVAL] = step + 1, counters[ModeKeys.EVAL] + 1
    writer.end_training()
    return root


def test_a_converged_keras_run_says_converged_and_passes_a_gate(tmp_path: Path) -> None:
    """On a converged run with Keras' epoch-end logs, LossNotDecreasing and Overtraining fire
    'converged', and with ignore_converged=true none of the three rules fires."""
    trial = create_trial(str(_write_keras_converged(tmp_path / "keras")))
    for rule in RULES:
        reasons, _ = _firings(trial, rule)
        assert {r["diagnosis"] for r in reasons} <= {"converged"}, rule
        if rule != "Overfit":
            assert reasons, rule
        quiet, (result, _) = _firings(trial, rule, ignore_converged="true")
        assert quiet == [] and result.fired_steps == (), rule
