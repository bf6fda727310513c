"""The rule kit's public surface: every module lists what it offers and the package docstring
explains every module."""

from __future__ import annotations

import importlib
import pkgutil

import evaluator.rules.kit as kit

MODULES = sorted(m.name for m in pkgutil.iter_modules(kit.__path__))


def test_the_kit_has_its_four_modules() -> None:
    """The kit is params, selection, windows and modes."""
    assert MODULES == ["modes", "params", "selection", "windows"]


def test_every_module_has_a_sorted_all_of_names_it_defines() -> None:
    """Each kit module's ``__all__`` is sorted, and each name in it exists and is documented."""
    for name in MODULES:
        module = importlib.import_module(f"evaluator.rules.kit.{name}")
        public = list(module.__all__)
        assert public == sorted(public), name
        for attr in public:
            value = getattr(module, attr)
            if callable(value):
                assert (value.__doc__ or "").strip(), f"{name}.{attr} has no docstring"


def test_the_package_docstring_explains_every_module() -> None:
    """The package docstring has a paragraph for each module, by its name."""
    doc = kit.__doc__ or ""
    assert [m for m in MODULES if f"``{m}``:" not in doc] == []
