"""smdebug.analysis.utils: ``no_refresh``, ``refresh`` and the parameter parsers."""

from __future__ import annotations

import re
from typing import Any

from evaluator.trial.refresh import no_refresh, refresh

__all__ = ["no_refresh", "parse_bool", "parse_list_from_str", "refresh"]


def _tensor_name_sorter(t_name: str) -> int:
    """The number a tensor name ends with after its last ``_`` (0 when it has none), to order
    ``inputs_0, inputs_1, …``."""
    if not re.match(r".+_\d+", t_name):
        return 0
    return int(t_name.split("_")[-1])


def parse_list_from_str(arg: str | list[Any] | None, delimiter: str = ",") -> list[Any]:
    """A list given as a ``delimiter``-separated string (``""`` and None: ``[]``), or a list
    as it is."""
    if arg is None or arg == "":
        return []
    if isinstance(arg, str):
        return arg.split(delimiter)
    if isinstance(arg, list):
        return arg
    raise TypeError(f"a string or a list expected, got {type(arg).__name__}")


def parse_bool(arg: Any, default: bool) -> bool:
    """``True``/``"True"``/``"true"`` and their False forms; None gives ``default``; anything
    else is a ValueError."""
    if arg is None:
        return default
    if arg in (True, "True", "true"):
        return True
    if arg in (False, "False", "false"):
        return False
    raise ValueError(f"boolean argument expected, but found {arg}")
