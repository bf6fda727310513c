"""DeadRelu: per-unit activity over the batch, the layer share, selection and parameter
errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.rules import invoke_rule
from evaluator.trial.trial import Trial
from rules_builtin import registry
from rules_builtin.dead_relu import DeadRelu, dead_percent

RNG = np.random.default_rng(0)


def relu_output(batch: int, units: int, dead: int) -> np.ndarray:
    """A dense layer's ReLU output with the first ``dead`` units always 0."""
    out = np.maximum(RNG.normal(size=(batch, units)), 0).astype(np.float32)
    out[:, :dead] = 0
    return out


def fired(rule: DeadRelu) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds DeadRelu by name, any case."""
    assert registry.lookup("deadrelu") is DeadRelu


def test_zero_initialised_layer_fires_at_step_0(make_trial: Callable[..., Any]) -> None:
    """A Dense+ReLU layer initialised with zeros outputs only zeros: it fires at step 0 (the
    intended 2019 test)."""
    x = RNG.normal(size=(32, 8)).astype(np.float32)
    out = np.maximum(x @ np.zeros((8, 16), np.float32) + np.zeros(16, np.float32), 0)
    trial = make_trial(
        {0: {"dense0_relu_output": out}, 1: {"dense0_relu_output": relu_output(32, 16, 0)}}
    )
    assert fired(DeadRelu(trial)) == (0,)


def test_healthy_layers_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """ReLUs active for about half of the samples never fire."""
    trial = make_trial({s: {"a_relu_output": relu_output(64, 32, 0)} for s in range(5)})
    assert fired(DeadRelu(trial)) == ()


def test_fires_only_when_more_than_threshold_layer_units_are_dead(
    make_trial: Callable[..., Any],
) -> None:
    """10 dead units of 16 (62.5 %) fire; 8 of 16 (exactly 50 %) do not."""
    trial = make_trial(
        {
            0: {"l_relu_output": relu_output(64, 16, 8)},
            1: {"l_relu_output": relu_output(64, 16, 10)},
        }
    )
    assert fired(DeadRelu(trial)) == (1,)


def test_threshold_inactivity_counts_rarely_active_units_as_dead() -> None:
    """A unit positive for 1 sample in 200 (0.5 %) is dead at 1 % and alive at 0.4 %."""
    out = np.zeros((200, 4), np.float32)
    out[0, :] = 1.0
    assert dead_percent(out, 1.0) == 100.0
    assert dead_percent(out, 0.4) == 0.0


def test_convolution_outputs_count_each_position_as_a_unit() -> None:
    """An NCHW output with one channel dead has that channel's positions dead (1 of 4)."""
    out = np.ones((8, 4, 3, 3), np.float32)
    out[:, 2] = 0
    assert dead_percent(out, 1.0) == 25.0


def test_tensor_regex_selects_the_layers(make_trial: Callable[..., Any]) -> None:
    """A dead tensor not matching tensor_regex is not checked."""
    trial = make_trial({0: {"x_relu_output": relu_output(8, 4, 0), "dead_act": np.zeros((8, 4))}})
    assert fired(DeadRelu(trial)) == ()
    assert fired(DeadRelu(trial, tensor_regex=".*relu_output,dead_act")) == (0,)


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("threshold_inactivity", "one"),
        ("threshold_layer", "half"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    make_trial: Callable[..., Any], parameter: str, value: str
) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial({0: {"a_relu_output": relu_output(4, 4, 0)}})
    with pytest.raises(ConfigurationError, match=rf"DeadRelu parameter {parameter} .*'{value}'"):
        DeadRelu(trial, **{parameter: value})


def test_bad_tensor_regex_is_a_configuration_error(make_trial: Callable[..., Any]) -> None:
    """An invalid regular expression names the parameter."""
    trial = make_trial({0: {"a_relu_output": relu_output(4, 4, 0)}})
    with pytest.raises(ConfigurationError, match="tensor_regex"):
        DeadRelu(trial, tensor_regex="*relu")


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in DeadRelu.PARAMETERS}
    assert declared == {
        "tensor_regex": None,
        "threshold_inactivity": "1.0",
        "threshold_layer": "50.0",
    }


def test_windows_and_single_steps_give_the_same_evidence(
    make_trial: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dead units counted over windows of steps (ours) and over each step's value alone (a
    trial without a batch read, as smdebug's) give the same comparisons and firings, for
    dense, convolution, integer, boolean, scalar and empty outputs."""
    steps = {
        s: {
            "a_relu_output": relu_output(16, 8, 2 * s),
            "conv_relu_output": relu_output(8, 24, 3 * s).reshape(8, 4, 6),
            "int_relu_output": (relu_output(8, 6, s) * 10).astype(np.int64),
            "bool_relu_output": relu_output(8, 6, 6 - s) > 0,
            "scalar_relu_output": np.float32(s),
            "empty_relu_output": np.zeros((0, 4), np.float32),
        }
        for s in range(6)
    }

    def run() -> str:
        rule = DeadRelu(make_trial(steps), tensor_regex="relu_output")
        fired_steps = fired(rule)
        assert fired_steps == (0, 1, 2, 3, 4, 5)
        return json.dumps([fired_steps, rule.evidence.summary(), rule.evidence.series()])

    windowed = run()
    monkeypatch.setattr(Trial, "columns", None)  # no batch read
    assert windowed == run()
