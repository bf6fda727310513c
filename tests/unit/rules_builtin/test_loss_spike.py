"""LossSpike on TensorBoard logs written to disk: our default definition and the frameworks'
(each reproducing the framework's decision on a recorded series, figures worked out from its
published definition in the comments)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from tests.unit.rules_builtin.stability_logs import log, run


def _noisy(n: int, seed: int = 0) -> list[float]:
    """A falling loss with 10 % multiplicative noise, as a mini-batch loss logs."""
    rng = np.random.default_rng(seed)
    return [float(2.0 * math.exp(-i / 60) + 0.3) * float(rng.lognormal(0, 0.1)) for i in range(n)]


def test_default_is_quiet_on_a_noisy_falling_loss(tmp_path: Path) -> None:
    """A noisy, falling loss with no spike checks every value after the warm-up and fires
    nowhere."""
    result = run(log(tmp_path, {"train/loss": _noisy(200)}), "LossSpike")
    assert result.fired == [] and not result.nothing


def test_default_fires_on_the_third_value_of_a_x4_spike(tmp_path: Path) -> None:
    """x4 for 3 logged values fires at the third (patience 3), the diagnosis transient: the
    loss came back at the fourth, and the evidence names the bound and the reference."""
    values = _noisy(120)
    values[80:83] = [4 * v for v in values[80:83]]
    result = run(log(tmp_path, {"train/loss": values}), "LossSpike")
    assert result.fired == [830]  # the 83rd logged value, step 830
    check = result.checks[0]
    assert (check.parameter, check.threshold, check.value, check.mode) == (
        "patience",
        3,
        3,
        "TRAIN",
    )
    assert check.diagnosis is not None and check.diagnosis.kind == "transient"
    figures = check.diagnosis.figures
    assert figures["lasted_values"] == 3 and figures["back_at_step"] == 840
    assert figures["bound"] < values[82] and figures["reference"] < figures["bound"]


def test_a_loss_that_stays_up_is_diverging(tmp_path: Path) -> None:
    """A loss that jumps x4 and stays there fires from its third value, diagnosed diverging."""
    values = _noisy(60)
    values[40:] = [4 * v for v in values[40:]]
    result = run(log(tmp_path, {"train/loss": values}), "LossSpike")
    assert result.fired[0] == 430
    assert result.checks[0].diagnosis is not None
    assert result.checks[0].diagnosis.kind == "diverging"
    assert result.checks[0].diagnosis.figures["lasted_values"] == 20


def test_two_spiking_values_are_not_three(tmp_path: Path) -> None:
    """A x4 jump for two logged values stays below patience 3; patience=2 fires on it."""
    values = _noisy(80)
    values[50:52] = [4 * v for v in values[50:52]]
    folder = log(tmp_path, {"train/loss": values})
    assert run(folder, "LossSpike").fired == []
    assert run(folder, "LossSpike", patience="2").fired == [520]


def test_eval_loss_is_not_followed_by_default(tmp_path: Path) -> None:
    """A spike in eval/loss (EVAL) is not a training-loss spike; mode=EVAL follows it."""
    values = _noisy(60)
    values[40:] = [5 * v for v in values[40:]]
    folder = log(tmp_path, {"train/loss": _noisy(60), "eval/loss": values})
    assert run(folder, "LossSpike").fired == []
    assert run(folder, "LossSpike", mode="EVAL").fired[0] == 430


def test_megatron(tmp_path: Path) -> None:
    """Megatron-LM: the largest |loss| of the first 100 values (here 3.0, at value 50) is
    kept; a loss >= 10 x 3.0 = 30 fires: 29.9 at value 102 does not, 30.0 at value 104 does."""
    values = [2.0] * 110
    values[49] = 3.0
    values[101] = 29.9
    values[103] = 30.0
    result = run(log(tmp_path, {"train/loss": values}), "LossSpike", definition="megatron")
    assert result.fired == [1040]


def test_megatron_samples_the_first_hundred(tmp_path: Path) -> None:
    """A spike of 40 among the first 100 values is sampled (the max becomes 40), so a later
    200 (< 400) does not fire."""
    values = [2.0] * 110
    values[59] = 40.0
    values[104] = 200.0
    assert (
        run(log(tmp_path, {"train/loss": values}), "LossSpike", definition="megatron").fired == []
    )


def test_llm_foundry(tmp_path: Path) -> None:
    """llm-foundry's KillLossSpike: after 100 losses of 1.0, four of 3.0 (each >= 2 x the mean
    of the last 100, 1.02 .. 1.06, every loss joining the window) are not enough; a 1.0
    resets the count; of the next five 3.0s the fifth (> patience 4) fires."""
    values = [1.0] * 100 + [3.0] * 4 + [1.0] + [3.0] * 5 + [1.0] * 5
    result = run(log(tmp_path, {"train/loss": values}), "LossSpike", definition="llm_foundry")
    assert result.fired[0] == 1100  # value 110: the fifth 3.0 in a row


def test_olmo(tmp_path: Path) -> None:
    """OLMo-core's StabilityMonitor: 128 values alternating 1.0 and 1.2 (mean 1.1, population
    standard deviation 0.1) put the bound at 1.1 + 6 x 0.1 = 1.7; 1.65 is no spike; once it
    joined the window (63 x 1.0, 64 x 1.2 and 1.65: mean 1.1051, std 0.1107, bound 1.7694)
    2.0 is. A spike before the
    window is full is not checked."""
    values = [1.0 if i % 2 == 0 else 1.2 for i in range(128)] + [1.65, 2.0]
    result = run(log(tmp_path, {"train/loss": values}), "LossSpike", definition="olmo")
    assert result.fired == [1300]
    early = [1.0 if i % 2 == 0 else 1.2 for i in range(128)]
    early[100] = 9.0
    assert (
        run(log(tmp_path / "early", {"train/loss": early}), "LossSpike", definition="olmo").fired
        == []
    )


def test_lightning(tmp_path: Path) -> None:
    """Lightning Fabric's SpikeDetection (rtol 2, window 10): after five 1.0s, 2.9 is 1.9
    above the running mean 1.0 (< 2 x 1.0) and joins it (mean 1.3167); 4.0 is then 2.68 above
    (>= 2 x 1.3167 = 2.63): a spike. 3.9 (2.58 above) would not be."""
    values = [1.0] * 5 + [2.9, 4.0]
    result = run(log(tmp_path, {"train/loss": values}), "LossSpike", definition="lightning")
    assert result.fired == [70]
    lower = run(log(tmp_path / "lower", {"train/loss": [1.0] * 5 + [2.9, 3.9]}), "LossSpike",
                definition="lightning")  # fmt: skip
    assert lower.fired == []


def test_lightning_calls_nan_a_spike(tmp_path: Path) -> None:
    """Lightning's finite_only: a NaN loss is a spike at once."""
    values = [1.0] * 5 + [math.nan]
    result = run(log(tmp_path, {"train/loss": values}), "LossSpike", definition="lightning")
    assert result.fired == [60]
    assert result.checks[0].diagnosis is not None
    assert result.checks[0].diagnosis.kind == "diverging"


def test_a_parameter_changes_one_setting_of_a_definition(tmp_path: Path) -> None:
    """definition=megatron with factor=5 fires on 16 (>= 5 x 3.0) where 10 x would not."""
    values = [3.0] * 100 + [16.0]
    folder = log(tmp_path, {"train/loss": values})
    assert run(folder, "LossSpike", definition="megatron").fired == []
    assert run(folder, "LossSpike", definition="megatron", factor="5").fired == [1010]


def test_too_short_a_log_checks_nothing(tmp_path: Path) -> None:
    """Five logged values (the warm-up) check nothing: the evaluator's Insufficient
    information, never a quiet pass."""
    assert run(log(tmp_path, {"train/loss": [1.0, 0.9, 0.8, 0.7, 0.6]}), "LossSpike").nothing


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"definition": "palm"}, "definition must be one of"),
        ({"reference": "mode"}, "reference must be mean, median or max"),
        ({"factor": "0", "sigmas": "0"}, "nothing tells a spike"),
        ({"patience": "0"}, "patience must be a whole number >= 1"),
    ],
)
def test_bad_parameters_name_themselves(
    tmp_path: Path, params: dict[str, str], message: str
) -> None:
    """A parameter the rule cannot use ends in a ConfigurationError naming it."""
    folder = log(tmp_path, {"train/loss": [1.0] * 10})
    with pytest.raises(ConfigurationError, match=message):
        run(folder, "LossSpike", **params)
