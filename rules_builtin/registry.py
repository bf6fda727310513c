"""The built-in rules by name: ``rule_to_invoke=VanishingGradient`` (any case) finds the class.

Each rule module registers its class with ``@register``; ``lookup`` imports the rule modules
on first use, so importing the registry stays cheap.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

__all__ = ["lookup", "names", "register"]

T = TypeVar("T", bound=type)

_RULES: dict[str, type] = {}
_loaded = False


def register(cls: T) -> T:
    """Class decorator: make ``cls`` available under its class name. A built-in rule records
    every comparison it makes (``Rule.RECORDS_COMPARISONS``)."""
    key = cls.__name__.lower()
    cls.RECORDS_COMPARISONS = True  # type: ignore[attr-defined]
    if key in _RULES and _RULES[key] is not cls:
        raise RuntimeError(f"two built-in rules named {cls.__name__}")
    _RULES[key] = cls
    return cls


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    import rules_builtin

    for module in pkgutil.iter_modules(rules_builtin.__path__):
        if module.name not in ("registry",) and not module.name.startswith("_"):
            importlib.import_module(f"rules_builtin.{module.name}")
    _loaded = True


def lookup(name: str) -> type | None:
    """The built-in rule class named ``name`` (case-insensitive), or None."""
    _load_all()
    return _RULES.get(name.strip().lower())


def names() -> list[str]:
    """Every built-in rule's name, sorted."""
    _load_all()
    return sorted(cls.__name__ for cls in _RULES.values())
