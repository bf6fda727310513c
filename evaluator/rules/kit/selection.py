"""Which tensors a rule looks at: one implementation for every built-in rule.

``collection_names`` and ``tensor_regex`` (comma-separated strings, as SageMaker sends them)
select the union of the named collections' tensors and the tensors matching any regex
(``re.search``, as smdebug's ``tensor_names(regex=...)``). With neither, a rule chooses its
default: all tensors, or a default collection.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from evaluator.errors import ConfigurationError, SMDebugValueError, TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import parse_list
from evaluator.trial.patterns import compile_pattern, matching_names

_MAX_SELECTIONS = 256  # per selection: distinct name lists of the steps

__all__ = ["TensorSelection", "listed", "percent_of", "scalar", "scalar_at"]


def scalar(value: Any) -> float | None:
    """A one-element array (shape (), (1,) or (1, 1) …) as a float; None for anything larger."""
    array = np.asarray(value)
    return float(array.reshape(-1)[0]) if array.size == 1 else None


def scalar_at(
    trial: Any, name: str, step: int, *, not_scalar: set[str], mode: ModeKeys = ModeKeys.GLOBAL
) -> float | None:
    """The one-element tensor ``name`` at ``step`` as a float; None if it was not saved there.
    A tensor with more than one element is added to ``not_scalar``, for the rule to skip."""
    try:
        value = scalar(trial.tensor(name).value(step, mode=mode))
    except TensorUnavailableForStep:
        return None
    if value is None:
        not_scalar.add(name)
    return value


def percent_of(difference: float, base: float) -> float:
    """``100 * difference / |base|``; +-inf (or 0 for no difference) when ``base`` is 0, NaN
    for a NaN difference."""
    if base == 0:
        if difference == 0 or math.isnan(difference):
            return 0.0 if difference == 0 else math.nan
        return math.copysign(math.inf, difference)
    return 100.0 * difference / abs(base)


def listed(names: list[str], most: int = 5) -> str:
    """The first ``most`` names, comma-separated, and how many more there are (for logs)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


class TensorSelection:
    """The tensors named by ``collection_names`` / ``tensor_regex``, resolved against a trial."""

    def __init__(
        self,
        rule: str,
        collection_names: object = None,
        tensor_regex: object = None,
        *,
        default_collections: Iterable[str] = (),
        all_when_empty: bool = True,
        regex_parameter: str = "tensor_regex",
    ) -> None:
        """``regex_parameter`` is the name the rule's users know the regexes by (errors say it)."""
        self.collections = parse_list(collection_names)
        self.regexes = parse_list(tensor_regex)
        for pattern in self.regexes:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ConfigurationError(
                    f"{rule} parameter {regex_parameter} has an invalid regular expression "
                    f"{pattern!r}: {e}"
                ) from None
        self.default_collections = list(default_collections)
        self.all_when_empty = all_when_empty
        self.regex_parameter = regex_parameter
        # (trial, its collections, the names available) -> (trial, the selection): a rule
        # selects at every step, and most steps save the same names.
        self._selected: dict[tuple[int, int, int, tuple[str, ...]], tuple[Any, list[str]]] = {}
        try:
            self._compiled = [
                compile_pattern(p, what=f"{rule} parameter {regex_parameter}") for p in self.regexes
            ]
        except SMDebugValueError as e:  # longer than max_regex_length
            raise ConfigurationError(str(e)) from None

    @property
    def given(self) -> bool:
        return bool(self.collections or self.regexes)

    def names(
        self, trial: Any, *, step: int | None = None, mode: ModeKeys = ModeKeys.GLOBAL
    ) -> list[str]:
        """Sorted names of the selected tensors (saved at ``step`` of ``mode`` when given)."""
        listed = (
            trial.tensor_names(step=step, mode=mode) if step is not None else trial.tensor_names()
        )
        # The selection depends on the names available and the collections alone (loaded
        # when the trial opens; a collection's include_regex matches among all names, and is
        # then cut to these).
        known = trial.collections()
        key = (id(trial), id(known), len(known), tuple(listed))
        found = self._selected.get(key)
        if found is None or found[0] is not trial:
            if len(self._selected) >= _MAX_SELECTIONS:
                self._selected.clear()
            found = self._selected[key] = (trial, self._select(trial, set(listed)))
        return list(found[1])

    def scalars_at(self, trial: Any, step: int) -> Iterator[tuple[str, float]]:
        """``(name, value)`` of each selected one-element tensor saved at global ``step``, in
        ``names`` order, read one at a time (a name not saved there, or of more elements, is
        passed over)."""
        for name in self.names(trial, step=step):
            try:
                value = scalar(trial.tensor(name).value(step))
            except TensorUnavailableForStep:
                continue
            if value is not None:
                yield name, value

    def _select(self, trial: Any, available: set[str]) -> list[str]:
        if not self.given:
            if self.default_collections:
                return sorted(self._in_collections(trial, self.default_collections) & available)
            return sorted(available) if self.all_when_empty else []
        chosen = self._in_collections(trial, self.collections)
        chosen |= matching_names(available, self._compiled)
        return sorted(chosen & available)

    def hint(self, *, parameter: str | None = None) -> SelectionHint:
        """What this selection looks for, to explain a run that found nothing to check;
        ``parameter`` is the one to suggest (default: the regex parameter)."""
        parts = []
        if self.collections:
            parts.append(f"collection_names {','.join(self.collections)!r}")
        if self.regexes:
            parts.append(f"{self.regex_parameter} {','.join(self.regexes)!r}")
        if not parts and self.default_collections:
            names = ", ".join(self.default_collections)
            parts.append(
                f"the {names} collection{'s' if len(self.default_collections) > 1 else ''}"
            )
        if not parts:
            parts.append("every tensor")
        return SelectionHint(
            " and ".join(parts),
            tuple(self.regexes + self.collections + self.default_collections),
            parameter or self.regex_parameter,
        )

    @staticmethod
    def _in_collections(trial: Any, names: Iterable[str]) -> set[str]:
        found: set[str] = set()
        known = trial.collections()
        for name in names:
            if name not in known:
                continue
            coll = known[name]
            found |= set(coll.tensor_names)
            patterns = [
                compile_pattern(p, what=f"collection {name}'s include_regex")
                for p in (coll.include_regex or [])
            ]
            if patterns:
                found |= matching_names(trial.tensor_names(), patterns)
        return found
