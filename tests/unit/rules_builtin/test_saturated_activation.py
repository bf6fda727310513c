"""SaturatedActivation: tanh / sigmoid inputs outside their thresholds, the function chosen by
name, selection and parameter errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.formats import Collection
from evaluator.rules import invoke_rule
from rules_builtin import registry
from rules_builtin.saturated_activation import (
    SaturatedActivation,
    activation_of,
    saturated_percent,
)

RNG = np.random.default_rng(1)


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest), collections given second."""

    def make(
        steps: Mapping[int, Mapping[str, object]], collections: Sequence[Collection] = ()
    ) -> Any:
        return make_trial(steps, collections=collections)

    return make


def inputs(batch: int, units: int, saturated: int, *, at: float = 30.0) -> np.ndarray:
    """Activation inputs: ``saturated`` units at +/- ``at``, the others near 0."""
    z = RNG.normal(size=(batch, units)).astype(np.float32)
    z[:, :saturated] = np.where(z[:, :saturated] > 0, at, -at)
    return z


def fired(rule: SaturatedActivation) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds SaturatedActivation by name, any case."""
    assert registry.lookup("saturatedactivation") is SaturatedActivation


def test_saturated_tanh_layer_fires_at_its_step(make_trial: Callable[..., Any]) -> None:
    """A tanh layer with 12 of 16 units beyond +/-9.4999 fires at that step only."""
    trial = make_trial(
        {
            0: {"dense_tanh_input": inputs(64, 16, 0)},
            1: {"dense_tanh_input": inputs(64, 16, 12)},
            2: {"dense_tanh_input": inputs(64, 16, 4)},
        }
    )
    assert fired(SaturatedActivation(trial)) == (1,)


def test_healthy_inputs_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """Inputs around 0 never fire, for tanh or sigmoid."""
    trial = make_trial(
        {
            s: {"a_tanh_input": inputs(32, 8, 0), "b_sigmoid_input": inputs(32, 8, 0)}
            for s in range(3)
        }
    )
    assert fired(SaturatedActivation(trial)) == ()


def test_sigmoid_uses_its_own_asymmetric_thresholds(make_trial: Callable[..., Any]) -> None:
    """Inputs of +/-20 saturate tanh and a sigmoid's upper side (> 16.99999), but not its lower
    side (> -23): all-negative sigmoid inputs at -20 do not fire, positive ones do."""
    z = np.full((16, 4), -20.0, np.float32)
    assert saturated_percent(z, -9.4999, 9.4999, 1.0) == 100.0
    trial = make_trial({0: {"s_sigmoid_input": z}, 1: {"s_sigmoid_input": -z}})
    assert fired(SaturatedActivation(trial)) == (1,)


def test_threshold_inactivity_is_the_share_of_samples_inside() -> None:
    """A unit inside the range for 2 of 100 samples is saturated at 3 % but not at 1 %."""
    z = np.full((100, 2), 50.0, np.float32)
    z[:2] = 0.0
    assert saturated_percent(z, -9.4999, 9.4999, 3.0) == 100.0
    assert saturated_percent(z, -9.4999, 9.4999, 1.0) == 0.0


def test_the_function_comes_from_the_last_name_in_the_tensor_name() -> None:
    """The innermost of tanh / sigmoid in a name decides; neither means skipped."""
    assert activation_of("block_tanh/SIGMOID_input") == "sigmoid"
    assert activation_of("sigmoid_block/tanh_input") == "tanh"
    assert activation_of("dense/relu_input") is None


def test_collection_names_add_tensors(make_trial: Callable[..., Any]) -> None:
    """A tensor outside the default regex is checked when its collection is named."""
    trial = make_trial(
        {0: {"act/tanh_pre": inputs(16, 4, 4)}},
        collections=[Collection("acts", include_regex=["^act/"])],
    )
    assert fired(SaturatedActivation(trial)) == ()
    assert fired(SaturatedActivation(trial, collection_names="acts")) == (0,)


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("threshold_tanh_min", "low"),
        ("threshold_tanh_max", "high"),
        ("threshold_sigmoid_min", "-"),
        ("threshold_sigmoid_max", "17x"),
        ("threshold_inactivity", "1%"),
        ("threshold_layer", "most"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    make_trial: Callable[..., Any], parameter: str, value: str
) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial({0: {"a_tanh_input": inputs(4, 4, 0)}})
    with pytest.raises(
        ConfigurationError, match=rf"SaturatedActivation parameter {parameter} .*'{value}'"
    ):
        SaturatedActivation(trial, **{parameter: value})


def test_min_must_be_below_max(make_trial: Callable[..., Any]) -> None:
    """A tanh range whose minimum is not below its maximum is a configuration error."""
    trial = make_trial({0: {"a_tanh_input": inputs(4, 4, 0)}})
    with pytest.raises(ConfigurationError, match="threshold_tanh_min must be smaller"):
        SaturatedActivation(trial, threshold_tanh_min="5", threshold_tanh_max="5")


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in SaturatedActivation.PARAMETERS}
    assert declared == {
        "collection_names": None,
        "tensor_regex": None,
        "threshold_tanh_min": "-9.4999",
        "threshold_tanh_max": "9.4999",
        "threshold_sigmoid_min": "-23",
        "threshold_sigmoid_max": "16.99999",
        "threshold_inactivity": "1.0",
        "threshold_layer": "50.0",
    }
