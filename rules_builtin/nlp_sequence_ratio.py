"""NLPSequenceRatio: too large a share of one token (padding, unknown) in the input sequences."""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float, parse_list
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import FLOATS, WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register

__all__ = ["DEFAULT_REGEX", "NLPSequenceRatio"]

# Token ids as saved: integers, or floats.
_NUMBERS = FLOATS + tuple(np.dtype(t) for t in (np.int32, np.int64, np.uint8, np.int16, np.uint16))

# An embedding layer's input, as SageMaker (MXNet), PyTorch/MXNet modules and Keras name it.
DEFAULT_REGEX = (
    r".*embedding0_input_0,(^|[._])emb[^./]*_input_0$,"
    r"(^|/)embedding(_\d+)?/inputs$"
)


@register
class NLPSequenceRatio(Rule):
    """Fires at a step when, in a tensor matching ``tensor_regex`` (the token ids fed to an
    embedding layer) saved at that step, the percentage of elements equal to one of
    ``token_values`` (default "0", e.g. the padding id) is greater than its threshold in
    ``token_thresholds_percent`` (default "50").

    The default selects an embedding layer's input as each hook names it: SageMaker's
    ``.*embedding0_input_0`` (MXNet Gluon's auto-named ``embedding0``), PyTorch and MXNet
    modules whose name starts with ``emb`` (``embedding_input_0``, ``encoder.embed_input_0``)
    and Keras' auto-named ``Embedding`` layers (``embedding/inputs``, ``embedding_1/inputs``).

    Both are comma-separated lists paired in order; a single threshold applies to every
    token, otherwise the lists must have the same length. Each step is judged on its own
    tensor (the share among all its elements, padding included).
    """

    PARAMETERS = (
        Param(
            "tensor_regex",
            DEFAULT_REGEX,
            "list",
            "Regular expressions of the input token tensors (comma-separated).",
        ),
        Param("token_values", "0", "list", "Token ids to measure, comma-separated."),
        Param(
            "token_thresholds_percent",
            "50",
            "list",
            "Fire when a token's share exceeds its percentage (one per token, or one for all).",
        ),
    )

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str | None = DEFAULT_REGEX,
        token_values: str = "0",
        token_thresholds_percent: str = "50",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.selection = TensorSelection(name, None, tensor_regex)
        tokens = [parse_float(name, "token_values", t) for t in parse_list(token_values)]
        limits = [
            parse_float(name, "token_thresholds_percent", t)
            for t in parse_list(token_thresholds_percent)
        ]
        if not tokens:
            raise ConfigurationError(
                f"{name} parameter token_values must list at least one "
                f"token id, got {token_values!r}"
            )
        if len(limits) == 1:
            limits *= len(tokens)
        if len(limits) != len(tokens):
            raise ConfigurationError(
                f"{name} parameter token_thresholds_percent must give one threshold, or one "
                f"per token of token_values ({len(tokens)}), got {token_thresholds_percent!r}"
            )
        self.thresholds = dict(zip(tokens, limits))
        # Per token: its threshold and the quantity's name, made once (not per tensor and step).
        self._checks = [
            (token, limit, f"share of token {token:g} (%)")
            for token, limit in self.thresholds.items()
        ]
        # The shares in a window of saved steps at once (where the trial has a batch read),
        # instead of a value() call and a comparison per tensor and step.
        # Over windows for number dtypes, over one step's value alone for any dtype.
        self._rows = WindowedRows(base_trial, self._shares, dtypes=_NUMBERS, alone_dtypes=None)

    def _shares(self, rows: np.ndarray) -> list[list[float]]:
        """Per row (one tensor's elements at one step), the share of each token in percent,
        as ``100.0 * np.count_nonzero(value == token) / value.size`` gives it for the row
        alone: the same element comparisons, the same count, the same float arithmetic."""
        size = rows.shape[1]
        counts = [np.count_nonzero(rows == token, axis=1).tolist() for token, _, _ in self._checks]
        return [[100.0 * count / size for count in per_row] for per_row in zip(*counts)]

    def selection_hints(self) -> list[SelectionHint]:
        return [self.selection.hint()]

    def invoke_at_step(self, step: int) -> bool:
        fired = False
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            shares = self._rows.get(name, step, names)
            if shares is None:
                continue  # no raw value, or an empty one
            for (token, limit, quantity), share in zip(self._checks, shares, strict=True):
                if self.evidence.compare(
                    step,
                    name,
                    quantity=quantity,
                    value=share,
                    parameter="token_thresholds_percent",
                    threshold=limit,
                    fires_when=">",
                    sentence=lambda: (
                        f"{self.rule_name}: token {token:g} is {share:.1f}% of {name} "
                        f"(> token_thresholds_percent {limit:g}%) at {step_words(self.base_trial, step)}"
                    ),
                ):
                    fired = True
        return fired
