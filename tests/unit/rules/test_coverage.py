"""The checked-nothing error: what matched nothing, what the trial holds, what to set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import InsufficientInformationForRuleInvocation, SMDebugError
from evaluator.formats import Collection
from evaluator.rules import Rule
from evaluator.rules.coverage import closest_names, nothing_checked_error, suggest_regex
from evaluator.rules.evidence import SelectionHint
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial


class _Selecting(Rule):
    def selection_hints(self) -> list[SelectionHint]:
        return [SelectionHint("tensor_regex '.*relu_output'", (".*relu_output",), "tensor_regex")]

    def invoke_at_step(self, step: int) -> bool:
        return False


@pytest.fixture
def keras_like(tmp_path: Path) -> Any:
    """A trial named as Keras names layers: relu1/outputs, dense/outputs, gradients."""
    writer = TrialWriter(tmp_path / "k")
    names = ["relu1/outputs", "relu2/outputs", "dense/outputs", "gradients/dense/kernelGrad"]
    writer.write_collections(
        [
            Collection("outputs", tensor_names=set(names[:3])),
            Collection("gradients", tensor_names=set(names[3:])),
        ]
    )
    writer.write_step(0, {n: np.ones((2, 2), np.float32) for n in names})
    writer.end_training()
    trial = create_trial(str(tmp_path / "k"))
    yield trial
    trial.close()


def test_error_names_selection_holdings_closest_names_and_parameter(keras_like: Any) -> None:
    """The message says what selected nothing, lists collections with counts and the closest
    names, and suggests a tensor_regex built from them."""
    error = nothing_checked_error(_Selecting(keras_like), steps_visited=1)
    assert isinstance(error, InsufficientInformationForRuleInvocation)
    assert isinstance(error, SMDebugError)
    text = str(error)
    assert text.startswith("Insufficient information to invoke rule _Selecting: ")
    assert "tensor_regex '.*relu_output' selected no tensor" in text
    assert "gradients (1)" in text and "outputs (3)" in text
    assert "closest tensor names: relu1/outputs, relu2/outputs" in text
    assert (
        r"set tensor_regex to select the tensors to check (for example "
        r"tensor_regex=relu\d+/outputs)" in text
    )


class _SelectingWhatItSuggests(Rule):
    def selection_hints(self) -> list[SelectionHint]:
        return [
            SelectionHint("tensor_regex 'relu\\d+/outputs'", (r"relu\d+/outputs",), "tensor_regex")
        ]

    def invoke_at_step(self, step: int) -> bool:
        return False


def test_a_selection_that_holds_the_closest_tensor_is_not_suggested_again(keras_like: Any) -> None:
    """When the given regex already is the one the message would suggest, the message says the
    tensor is selected and had nothing to check, instead of suggesting the same regex."""
    text = str(nothing_checked_error(_SelectingWhatItSuggests(keras_like), steps_visited=1))
    assert "set tensor_regex" not in text
    assert r"relu1/outputs is selected already (tensor_regex=relu\d+/outputs)" in text


def test_no_step_in_the_window_is_said(keras_like: Any) -> None:
    """With no saved step inside [start_step, end_step) the message says so."""
    text = str(nothing_checked_error(_Selecting(keras_like), steps_visited=0, window=(5, 9)))
    assert "no saved step between global steps 5 to 9 (exclusive) to evaluate" in text


def test_closest_names_prefers_shared_words() -> None:
    """Names sharing a word with the pattern come first; unrelated names are left out."""
    names = ["Net_relu1_output_0", "Net_fc1.weight", "loss", "relu_input_0"]
    assert closest_names(names, [".*relu_output"])[:2] == ["Net_relu1_output_0", "relu_input_0"]
    assert closest_names(names, []) == []


def test_suggest_regex_generalises_numbers() -> None:
    """Digits become \\d+ and regex characters are escaped."""
    assert suggest_regex("relu1/outputs") == r"relu\d+/outputs"
    assert suggest_regex("Net_fc1.weight") == r"Net_fc\d+\.weight"
