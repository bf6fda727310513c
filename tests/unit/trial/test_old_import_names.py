"""The import names of the modules that moved to evaluator.engine keep working for a release,
with a DeprecationWarning naming the new place."""

from __future__ import annotations

import importlib
import sys

import pytest

MOVED = ("options", "cache", "columns", "reads", "runner")


@pytest.mark.parametrize("name", MOVED)
def test_an_old_name_gives_the_same_objects_and_says_where_they_went(name: str) -> None:
    """``evaluator.trial.<name>`` re-exports ``evaluator.engine.<name>`` and warns once."""
    sys.modules.pop(f"evaluator.trial.{name}", None)
    with pytest.warns(DeprecationWarning, match=f"evaluator.engine.{name}"):
        old = importlib.import_module(f"evaluator.trial.{name}")
    new = importlib.import_module(f"evaluator.engine.{name}")
    assert old.__all__ == new.__all__
    assert all(getattr(old, n) is getattr(new, n) for n in new.__all__)
