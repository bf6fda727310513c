"""NLPSequenceRatio: token shares against their thresholds, list pairing and parameter
errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.trial.trial import Trial
from rules_builtin import registry
from rules_builtin.nlp_sequence_ratio import DEFAULT_REGEX, NLPSequenceRatio

NAME = "embedding0_input_0"


def sequences(padding: int, unknown: int = 0, total: int = 100) -> np.ndarray:
    """4 sequences of 25 token ids: ``padding`` zeros, ``unknown`` ones, the rest 5..."""
    ids = np.concatenate(
        [np.zeros(padding), np.ones(unknown), np.arange(5, 5 + total - padding - unknown)]
    )
    return ids.astype(np.int64).reshape(4, -1)


def fired(rule: NLPSequenceRatio) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds NLPSequenceRatio by name, any case."""
    assert registry.lookup("nlpsequenceratio") is NLPSequenceRatio


def test_mostly_padding_fires_at_that_step(make_trial: Callable[..., Any]) -> None:
    """60 % padding (token 0) exceeds the default 50 % at step 1; 50 % exactly does not."""
    trial = make_trial(
        {0: {NAME: sequences(50)}, 1: {NAME: sequences(60)}, 2: {NAME: sequences(10)}}
    )
    assert fired(NLPSequenceRatio(trial)) == (1,)


def test_each_token_has_its_own_threshold(make_trial: Callable[..., Any]) -> None:
    """With tokens "0, 1" and thresholds "50, 10", 20 % unknown (1) fires and 20 % padding
    does not."""
    trial = make_trial({0: {NAME: sequences(20)}, 1: {NAME: sequences(5, unknown=20)}})
    rule = NLPSequenceRatio(trial, token_values="0, 1", token_thresholds_percent="50, 10")
    assert fired(rule) == (1,)


def test_one_threshold_applies_to_every_token(make_trial: Callable[..., Any]) -> None:
    """A single threshold is used for each listed token."""
    trial = make_trial({0: {NAME: sequences(5, unknown=20)}})
    assert fired(NLPSequenceRatio(trial, token_values="0,1", token_thresholds_percent="15")) == (0,)


def test_tensor_regex_selects_the_inputs(make_trial: Callable[..., Any]) -> None:
    """A padded tensor not matching tensor_regex is not checked."""
    trial = make_trial({0: {"tokens": sequences(90)}})
    assert fired(NLPSequenceRatio(trial)) == ()
    assert fired(NLPSequenceRatio(trial, tensor_regex="tokens")) == (0,)


def test_firing_reason_names_tensor_share_and_threshold(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the tensor, the token's share and its threshold; each token is
    its own comparison."""
    trial = make_trial({0: {NAME: sequences(60, unknown=10)}})
    rule = NLPSequenceRatio(trial, token_values="0,1", token_thresholds_percent="50,20")
    assert fired(rule) == (0,)
    assert rule.evidence.comparisons == 2
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (0, [NAME])
    assert (reason["quantity"], reason["value"]) == ("share of token 0 (%)", 60)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "token_thresholds_percent",
        50,
        ">",
    )
    assert (
        f"token 0 is 60.0% of {NAME} (> token_thresholds_percent 50%) at step 0"
        in reason["sentence"]
    )


def test_tensor_regex_matching_nothing_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """With no tensor matching tensor_regex nothing is recorded; the error names it."""
    rule = NLPSequenceRatio(make_trial({0: {"tokens": sequences(60)}}))
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=1))
    assert f"tensor_regex {DEFAULT_REGEX!r} selected no tensor" in text
    assert "set tensor_regex to select the tensors to check" in text


def test_threshold_count_must_match_the_tokens(make_trial: Callable[..., Any]) -> None:
    """Two thresholds for three tokens is a configuration error naming both parameters."""
    trial = make_trial({0: {NAME: sequences(0)}})
    with pytest.raises(ConfigurationError, match="token_thresholds_percent .* token_values"):
        NLPSequenceRatio(trial, token_values="0,1,2", token_thresholds_percent="50,50")


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("token_values", "pad"),
        ("token_values", ""),
        ("token_thresholds_percent", "half"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    make_trial: Callable[..., Any], parameter: str, value: str
) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial({0: {NAME: sequences(0)}})
    with pytest.raises(
        ConfigurationError, match=rf"NLPSequenceRatio parameter {parameter} .*'{value}'"
    ):
        NLPSequenceRatio(trial, **{parameter: value})


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in NLPSequenceRatio.PARAMETERS}
    assert declared == {
        "tensor_regex": DEFAULT_REGEX,
        "token_values": "0",
        "token_thresholds_percent": "50",
    }


@pytest.mark.parametrize(
    "name",
    [
        "embedding0_input_0",
        "embedding_input_0",
        "encoder.embed_input_0",
        "embedding/inputs",
        "embedding_1/inputs",
    ],
)
def test_default_finds_embedding_inputs_of_every_hook(
    make_trial: Callable[..., Any], name: str
) -> None:
    """MXNet, PyTorch and Keras names of an embedding layer's input are checked by default."""
    padded = np.zeros((4, 10), np.int64)
    rule = NLPSequenceRatio(make_trial({0: {name: padded, "dense/inputs": padded}}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (0,)
    assert rule.evidence.summary()["tensors_checked"] == 1


@pytest.mark.parametrize(
    ("tokens", "limits", "make"),
    [
        ("0,1", "50,10", lambda s: np.arange(s, s + 24).reshape(4, 6) % (s + 2)),  # int64
        ("0", "30", lambda s: (np.arange(30) % (s + 1)).astype(np.int32)),
        ("0.1,0", "5", lambda s: np.array([0.1, 0.0, np.nan, 0.1 * s], np.float32)),
        ("0.1", "5", lambda s: np.array([0.1, 0.1, 0.3, np.nan])),
        ("0", "50", lambda s: np.zeros((0, 3), np.int64)),  # empty: not checked
    ],
)
def test_windows_give_the_evidence_of_the_per_step_path(
    make_trial: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    tokens: str,
    limits: str,
    make: Callable[[int], np.ndarray],
) -> None:
    """Shares over windows and step by step (the per-step API, as on smdebug's trial) give
    the same comparisons, series and firings: the same elements match a token (a float32
    tensor compares with the token as float32), the same arithmetic."""

    def run() -> str:
        trial = make_trial({s: {NAME: make(s)} for s in range(6)})
        rule = NLPSequenceRatio(trial, token_values=tokens, token_thresholds_percent=limits)
        steps = fired(rule)
        return json.dumps([steps, rule.evidence.summary(), rule.evidence.series()])

    windowed = run()
    monkeypatch.setattr(Trial, "columns", None)  # no batch read, as smdebug's trial
    assert windowed == run()
