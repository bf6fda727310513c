"""Time to detection: for every labelled fault, the step it became measurable and the step the
rule fired; the lag per rule (median, max), false alarms on healthy runs, vacuous passes.

    .venv/bin/python bench/detection.py        # writes bench/DETECTION.md (a few minutes)

The onset of a fault is measured WITHOUT the rule:

* numpy scenarios (tests/scenarios/training.py): the training code records, as it trains, the
  first step of each measurable fault on its own numbers (``fault_onsets.json`` beside the
  trial): a layer's gradient mean |g| < 1e-7, a non-finite value, > 50 % of a layer's ReLU
  units dead for the whole batch, > 50 % of tanh inputs outside (-9.5, 9.5), weights equal to
  the previous step's, the first saved labels, and the last real fall (> 0.1 % below the lowest
  so far) of the loss over the WHOLE training set and over the eval set (noise-free).
* real-hook trials (tests/fixtures/hook_trials): the training script's own measurements in
  ``labels.json`` (``evidence``), read with the definitions in ``HOOK_ONSETS`` below.

Lag is counted in saved steps (the trial's global steps, every mode) from the first saved
step at or after the onset to the first firing. "Latest allowed" is the latest step any
documented reading of the rule allows it to fire on the fault (bench/allowed/, from the
documents and the trial's values, not from the rule's code); "within" says whether the rule
fired by one saved step after it, the issue's goal. A labelled fault the rule did not fire on is a
miss; one it "checked nothing" on is a vacuous pass. Not a test: nothing here is timed.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.allowed import NOTES, latest_allowed  # noqa: E402
from evaluator.trial import create_trial  # noqa: E402
from tests.hook_trials import outcomes as hook_outcomes  # noqa: E402
from tests.scenarios import outcomes as scenario_outcomes  # noqa: E402
from tests.scenarios.training import ONSET_FILE, REAL_FALL  # noqa: E402

REPORT = ROOT / "bench" / "DETECTION.md"

# rule -> (scenario, the onsets recorded by the training code that start the fault)
SCENARIO_ONSETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "VanishingGradient": ("vanishing_gradients", ("vanishing_gradient",)),
    "ExplodingTensor": ("exploding", ("nonfinite",)),
    "DeadRelu": ("dead_relu", ("dead_relu_over_50pct",)),
    "AllZero": ("dead_relu", ("relu_output_all_zero",)),
    "SaturatedActivation": ("saturated_tanh", ("saturated_over_50pct",)),
    "LossNotDecreasing": ("lr_zero", ("train_loss_last_real_fall",)),
    "UnchangedTensor": ("lr_zero", ("weights_unchanged",)),
    "WeightUpdateRatio": ("lr_zero", ("weights_unchanged",)),
    "Overfit": ("overfit", ("eval_loss_last_real_fall",)),
    "Overtraining": ("overfit", ("eval_loss_last_real_fall", "train_loss_last_real_fall")),
    "ClassImbalance": ("imbalanced", ("labels_saved",)),
}


def _last_real_fall(values: list[float], steps: list[int]) -> int | None:
    """The step after which the series never fell more than REAL_FALL below its lowest."""
    low: tuple[float, int] | None = None
    for raw, s in zip(values, steps):
        v = float(raw)  # labels.json writes non-finite values as "nan" / "inf"
        if v != v:  # NaN: not a fall
            continue
        if low is None or v < low[0] - abs(low[0]) * REAL_FALL:
            low = (v, s)
    return low[1] if low else None


def _mode_steps(lab: dict[str, Any], mode: str) -> list[int]:
    return list(lab["written_by_hook"]["modes"].get(mode, {}).get("global_steps", []))


def _activation_onset(lab: dict[str, Any], kinds: tuple[str, ...], key: str) -> int | None:
    ev = lab["evidence"]
    for which in ("activations_first_saved_train_step", "activations_last_saved_train_step"):
        snap = ev.get(which) or {}
        for layer in snap.get("layers", {}).values():
            if layer.get("kind") in kinds and (layer.get(key) or 0) > 50:
                return int(snap["global_step"])
    return None


def _saturation_key(lab: dict[str, Any]) -> str:
    """The rule's own measure (units saturated for the whole batch) when the trial holds it,
    else the older trials' share of inputs outside the range."""
    snap = lab["evidence"].get("activations_first_saved_train_step") or {}
    units = any("saturated_units_pct" in v for v in snap.get("layers", {}).values())
    return "saturated_units_pct" if units else "inputs_outside_range_pct"


def _vanishing(lab: dict[str, Any]) -> int | None:
    grads = lab["evidence"].get("gradient_mean_abs_per_variable") or lab["evidence"].get(
        "gradient_mean_abs_per_parameter", {}
    )
    firsts = [g.get("first_step") for g in grads.values()]  # 0.0 is a vanished gradient too
    if any(isinstance(f, float) and 0 <= f < 1e-7 for f in firsts):
        return _mode_steps(lab, "TRAIN")[0]
    return None


def _train_loss_fall(lab: dict[str, Any]) -> int | None:
    ev = lab["evidence"]
    if "evals_per_round" in ev:  # XGBoost: the training loss metric, per round
        return _xgb_fall(lab, tuple(f"train-{m}" for m in XGB_LOSSES))
    for key in ("train_batch_loss", "train_loss"):
        if f"{key}_per_step" in ev:
            return _last_real_fall(ev[f"{key}_per_step"], ev[f"{key}_global_steps"])
    return None


def _overfit_start(lab: dict[str, Any]) -> int | None:
    """The first epoch whose mean validation loss rose while its mean training loss fell, at
    that epoch's last EVAL step (an epoch's validation loss is known once its pass ends)."""
    epochs = lab["evidence"].get("per_epoch") or []
    val = [e.get("val_loss", e.get("val_loss_mean")) for e in epochs]
    train = [e.get("train_loss_keras_epoch_mean", e.get("train_loss_mean")) for e in epochs]
    evals = _mode_steps(lab, "EVAL")
    per = len(evals) // len(val) if val else 0
    for e in range(1, len(val)):
        if per and val[e] > val[e - 1] and train[e] < train[e - 1]:
            return evals[(e + 1) * per - 1]
    return None


def _epoch_fall(lab: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """The epoch after which an epoch mean loss (the first of ``keys`` in per_epoch) never
    really fell, at that epoch's last EVAL step (known once the epoch ends)."""
    epochs = lab["evidence"].get("per_epoch") or []
    values = [next((e[k] for k in keys if k in e), None) for e in epochs]
    if not values or None in values:
        return None
    epoch = _last_real_fall(values, list(range(len(values))))
    evals = _mode_steps(lab, "EVAL")
    per = len(evals) // len(values)
    return evals[(epoch + 1) * per - 1] if per and epoch is not None else None


def _overtraining(lab: dict[str, Any]) -> int | None:
    """XGBoost: the first of the train / validation metric's last real falls (per round);
    deep learning: the first of the epoch training and validation mean losses' (the epoch
    means, not the noisy per-batch values)."""
    if "evals_per_round" in lab["evidence"]:
        return _xgb_fall(
            lab, tuple(f"{d}-{m}" for d in ("train", "validation") for m in XGB_LOSSES)
        )
    found = [
        _epoch_fall(lab, ("train_loss_keras_epoch_mean", "train_loss_mean")),
        _epoch_fall(lab, ("val_loss", "val_loss_mean")),
    ]
    found = [f for f in found if f is not None]
    return min(found) if found else None


XGB_LOSSES = ("logloss", "mlogloss", "rmse")  # binary, multi-class, regression objectives


def _xgb_fall(lab: dict[str, Any], names: tuple[str, ...]) -> int | None:
    evals = lab["evidence"]["evals_per_round"]
    found = [_last_real_fall(evals[n], list(range(len(evals[n])))) for n in names if n in evals]
    found = [f for f in found if f is not None]
    return min(found) if found else None


def _first_train(lab: dict[str, Any]) -> int | None:
    steps = _mode_steps(lab, "TRAIN") or _mode_steps(lab, "GLOBAL")
    return steps[0] if steps else None


def _second_train(lab: dict[str, Any]) -> int | None:
    steps = _mode_steps(lab, "TRAIN")
    return steps[1] if not lab["evidence"].get("weights_changed", True) and steps[1:] else None


# Faults the trials' own measurements show beyond their "expected" list: an overfitting run's
# validation loss stops improving, a flat run's training loss never falls (Overtraining's fault).
ALSO_LABELLED = {
    "keras_overfit": ["Overtraining"],
    "pytorch_overfit": ["Overtraining"],
    "keras_flat_loss": ["Overtraining"],
    "pytorch_flat_loss": ["Overtraining"],
    "pytorch_nan_start": ["Overtraining"],
    "pytorch_transformer_stalled": ["Overtraining"],
    "xgboost_regression_flat": ["Overtraining"],
}

# rule -> (rule-independent definition, onset from labels.json)
HOOK_ONSETS: dict[str, tuple[str, Callable[[dict[str, Any]], int | None]]] = {
    "DeadRelu": (
        "a ReLU layer with > 50 % of units outputting <= 0 for the whole batch (evidence)",
        lambda lab: _activation_onset(lab, ("relu",), "dead_units_pct"),
    ),
    "SaturatedActivation": (
        "> 50 % of a tanh/sigmoid layer's units saturated (inside (-9.5, 9.5) / (-23, 17) for "
        "< 1 % of the batch) where the trial measured it (saturated_units_pct), else > 50 % "
        "of its inputs outside (evidence)",
        lambda lab: _activation_onset(lab, ("tanh", "sigmoid"), _saturation_key(lab)),
    ),
    "TanhSaturation": (
        "> 50 % of a tanh layer's inputs outside (-9.5, 9.5) (evidence)",
        lambda lab: _activation_onset(lab, ("tanh",), "inputs_outside_range_pct"),
    ),
    "SigmoidSaturation": (
        "> 50 % of a sigmoid layer's inputs outside (-23, 17) (evidence)",
        lambda lab: _activation_onset(lab, ("sigmoid",), "inputs_outside_range_pct"),
    ),
    "ExplodingTensor": (
        "the first non-finite value the script saw (first_nonfinite_global_step)",
        lambda lab: lab["evidence"].get("first_nonfinite_global_step"),
    ),
    "VanishingGradient": (
        "a variable's gradient mean |g| < 1e-7 at the first step (evidence)",
        _vanishing,
    ),
    "LossNotDecreasing": (
        "the training loss's last real fall (> 0.1 % below its lowest so far)",
        _train_loss_fall,
    ),
    "WeightUpdateRatio": (
        "weights never changed: the second saved TRAIN step (the first update)",
        _second_train,
    ),
    "Overfit": (
        "the first epoch whose validation loss rose while its training loss fell (per_epoch)",
        _overfit_start,
    ),
    "Overtraining": (
        "the first of the training and the validation loss's last real falls (XGBoost: "
        "evals_per_round; Keras/PyTorch: the epoch mean training and validation losses, at "
        "that epoch's last EVAL step)",
        _overtraining,
    ),
    "PoorWeightInitialization": (
        "the initial weight variances (measured before training): the first saved step",
        _first_train,
    ),
    "ClassImbalance": ("the class counts of the labels: the first saved step", _first_train),
    "TreeDepth": ("the first round's tree depth: the first saved step", _first_train),
}


# What a rule must wait for by its documented definition, whatever the noise (default
# parameters): part of every lag above, not a delay of ours.
DOCUMENTED_WAIT = {
    "LossNotDecreasing": "num_steps=10 mode steps after the first comparable value (on the "
    "flat-loss trials TRAIN and EVAL alternate: 10 TRAIN steps = 20 saved steps); a plateau "
    "fires at the first evaluation (every 10 mode steps) whose anchor lies on it when the "
    "loss is smooth, or noisy with single values showing no fall and window means no fall "
    "beyond one standard error of the noise over one window nor two; else when the window "
    "means show none, up to two windows of 10 later (rules_builtin/_levels.py); these trials "
    "save the loss at every step, so the noise-aware windows keep num_steps (_cadence.py)",
    "PoorWeightInitialization": "the loss check: patience=5 TRAIN steps for a smooth loss, "
    "two windows of 5 for a noisy one; the variance and gradient checks: none",
    "Overtraining": "patience_train=5 TRAIN values / patience_validation=10 validation passes "
    "without a new best after the best (the first value is the first best); TRAIN values are "
    "averaged over up to ceil(patience_train / 2) values, a validation pass is its mean, "
    "judged at the next non-EVAL step; Keras epoch-end logs are not averaged (1 epoch end = 1 "
    "value); the numpy scenarios run it with patience 20 on every step and EVAL every 4 saved "
    "steps",
    "Overfit": "a complete validation pass (judged at the next non-EVAL step) not below the "
    "best earlier one by more than the passes' noise (1 % with noise_aware=false), or on "
    "noisy passes a mean of 2-5 passes risen above the lowest beyond 1.5 standard errors and "
    "5 % (never the first pass: a gap while the validation loss falls is not overfitting); "
    "latest allowed: the pass-mean, cumulative-mean and Keras epoch-end readings' latest",
}


def _lag(saved: list[int], onset: int, fired: int) -> int:
    start = next((i for i, s in enumerate(saved) if s >= onset), len(saved))
    return saved.index(fired) - start if fired in saved else fired - onset


def _within(saved: list[int], allowed: int | None, fired: int | None) -> bool | None:
    """Whether the rule fired by one saved step after the latest allowed step."""
    if allowed is None or fired is None:
        return None
    return _lag(saved, allowed, fired) <= 1


def _row(
    run: str, rule: str, onset: int | None, outcome: Any, saved: list[int], allowed: int | None
) -> dict[str, Any]:
    fired = outcome.fired[0] if outcome.fired else None
    lag = _lag(saved, onset, fired) if onset is not None and fired is not None else None
    return {"run": run, "rule": rule, "onset": onset, "fired": fired, "lag": lag,
            "allowed": allowed, "within": _within(saved, allowed, fired),
            "cell": outcome.cell}  # fmt: skip


def measure(workdir: Path) -> dict[str, Any]:
    scen = scenario_outcomes.run_all(workdir / "scenarios")
    rows, alarms = [], []
    for rule, (name, keys) in SCENARIO_ONSETS.items():
        folder = workdir / "scenarios" / name
        onsets = json.loads((folder / ONSET_FILE).read_text())
        found = [onsets[k] for k in keys if onsets.get(k) is not None]
        trial = create_trial(str(folder))
        saved = list(trial.steps())
        onset = min(found) if found else None
        params = scenario_outcomes.PARAMETERS.get(rule, {})
        allowed = latest_allowed(rule, trial, onset, params)
        trial.close()
        rows.append(_row(f"scenario {name}", rule, onset, scen[rule][name], saved, allowed))
    alarms += [
        ("scenario healthy", r, o["healthy"].cell) for r, o in scen.items() if o["healthy"].fired
    ]
    hooks = hook_outcomes.run_all(workdir / "hooks")
    for trial_name in hook_outcomes.TRIALS:
        lab = hook_outcomes.labels(trial_name)
        saved = sorted(
            {s for m in lab["written_by_hook"]["modes"].values() for s in m["global_steps"]}
        )
        trial = create_trial(str(hook_outcomes.ROOT / trial_name))
        for rule in hook_outcomes.FAULTS[trial_name] + ALSO_LABELLED.get(trial_name, []):
            definition = HOOK_ONSETS.get(rule)
            onset = definition[1](lab) if definition else None
            allowed = latest_allowed(rule, trial, onset, {})
            rows.append(_row(trial_name, rule, onset, hooks[rule][trial_name], saved, allowed))
        trial.close()
        if trial_name.endswith("_healthy"):
            alarms += [
                (trial_name, r, o[trial_name].cell) for r, o in hooks.items() if o[trial_name].fired
            ]
    return {"rows": rows, "false_alarms": alarms}


def render(figures: dict[str, Any]) -> str:
    rows = figures["rows"]
    out = [
        "# Time to detection",
        "",
        "Generated by `bench/detection.py` (do not edit). Default parameters on the real-hook",
        "trials; the scenario table's parameters on the numpy scenarios (tests/scenarios/outcomes.py).",
        "Onset: the first step the fault is measurable, measured without the rule (see the",
        "module docstring and the definitions below). Lag: saved steps from the first saved step",
        "at or after the onset to the rule's first firing; a negative lag is a firing before",
        "the fault was measurable (on noise). Latest allowed: the latest step any documented",
        "reading of the rule allows it to fire (bench/allowed/, from the documents and the",
        "trial's values); within: fired by one saved step after it (the issue's goal).",
        "",
        "## Per rule",
        "",
        "| rule | faults | detected | missed | vacuous | fired before onset | lag median | lag max "
        "| within (<= +1 saved step) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for rule in sorted({r["rule"] for r in rows}):
        mine = [r for r in rows if r["rule"] == rule]
        lags = [r["lag"] for r in mine if r["lag"] is not None]
        vacuous = sum(1 for r in mine if r["cell"] == hook_outcomes.CHECKED_NOTHING)
        missed = sum(1 for r in mine if r["fired"] is None) - vacuous
        early = sum(1 for lag in lags if lag < 0)
        med = f"{statistics.median(lags):g}" if lags else "-"
        within = sum(1 for r in mine if r["within"])
        out.append(f"| {rule} | {len(mine)} | {len(mine) - missed - vacuous} | {missed} | "
                   f"{vacuous} | {early} | {med} | {max(lags) if lags else '-'} | "
                   f"{within}/{len(mine)} |")  # fmt: skip
    out += ["", "What a rule waits for by definition (part of the lag):", ""]
    out += [f"- {rule}: {text}" for rule, text in DOCUMENTED_WAIT.items()]
    alarms = figures["false_alarms"]
    out += ["", f"## False alarms on healthy runs: {len(alarms)}", ""]
    out += [f"- {run}: {rule} {cell}" for run, rule, cell in alarms] or ["(none)"]
    out += ["", "## Every labelled fault", "",
            "| run | rule | onset | fired | lag (saved steps) | latest allowed "
            "| within (<= +1 saved step) |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        onset = "-" if r["onset"] is None else r["onset"]
        fired = r["cell"] if r["fired"] is None else r["fired"]
        lag = "-" if r["lag"] is None else r["lag"]
        allowed = "-" if r["allowed"] is None else r["allowed"]
        within = {True: "yes", False: "NO", None: "-"}[r["within"]]
        out.append(f"| {r['run']} | {r['rule']} | {onset} | {fired} | {lag} | {allowed} "
                   f"| {within} |")  # fmt: skip
    out += ["", "## Notes", ""]
    out += [f"- {text}" for text in NOTES]
    out += ["", "## Onset definitions on the real-hook trials", ""]
    out += [f"- {rule}: {text}" for rule, (text, _) in sorted(HOOK_ONSETS.items())]
    out += ["", "Scenarios: `tests/scenarios/training.py` (`_Onsets`) records, per rule:", ""]
    out += [
        f"- {rule}: {name}, {' / '.join(keys)}" for rule, (name, keys) in SCENARIO_ONSETS.items()
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    if "pytest" in sys.modules:
        raise SystemExit("bench/detection.py is a benchmark, not a test")
    with tempfile.TemporaryDirectory(prefix="detection-") as tmp:
        figures = measure(Path(tmp))
    REPORT.write_text(render(figures))
    (ROOT / "bench" / "detection.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(REPORT.read_text())


if __name__ == "__main__":
    main()
