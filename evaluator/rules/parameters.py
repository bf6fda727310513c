"""Which rule takes which parameter, decided once every rule class of a run is loaded.

A rule takes a parameter its constructor names (other than ``base_trial``, ``other_trials`` and
``action_str``, which the evaluator fills), or any non-reserved key when it has ``**kwargs``.

* A key given for one rule alone (``RuleSpec.rule_only``) that the rule does not take fails
  that rule.
* Any other key goes to the rules of the run that take it; one that no rule takes fails every
  rule, each with the same message (the run must end in Error, and each rule's result says why).
* Lower-case environment variables (``RuleSpec.environment_parameters``) are not checked: they
  only fill a named argument nothing else gave.

Messages name the parameter, the rule and the closest valid names (difflib), evaluator keys
such as ``start_step`` included.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evaluator.config import RESERVED_KEYS, RuleSpec
from evaluator.errors import ConfigurationError

__all__ = ["Accepts", "accepts", "check_parameters", "effective_parameters", "route_parameters"]

# Constructor arguments the evaluator fills itself; never a user's parameter.
EVALUATOR_FILLED = frozenset({"base_trial", "other_trials", "action_str"})
_SUGGESTABLE_KEYS = sorted(RESERVED_KEYS - {"action_str", "rule_config_file"})


@dataclass(frozen=True)
class Accepts:
    """The parameters a rule class takes: named constructor arguments, and any key if
    ``any_key`` (``**kwargs``)."""

    names: tuple[str, ...]
    any_key: bool

    def takes(self, key: str) -> bool:
        return key in self.names or (self.any_key and key not in RESERVED_KEYS)


def accepts(cls: type) -> Accepts:
    """What ``cls(base_trial, ...)`` takes; an unreadable signature takes anything."""
    try:
        init = inspect.signature(cls.__init__)  # type: ignore[misc]
        params = list(init.parameters.values())[2:]  # self, base_trial
    except (TypeError, ValueError):
        return Accepts((), True)
    names = tuple(
        p.name
        for p in params
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in EVALUATOR_FILLED
    )
    return Accepts(names, any(p.kind == p.VAR_KEYWORD for p in params))


def route_parameters(
    specs: Sequence[RuleSpec],
    classes: Mapping[str, type | None],
) -> dict[str, dict[str, str] | ConfigurationError]:
    """Per rule (configuration name): the parameters it takes, or the error that fails it.

    A rule whose class did not load (None) gets no entry, and then no key counts as taken by
    no rule: that rule might have taken it (the run ends in Error anyway).
    """
    taken = {
        s.configuration_name: accepts(c)
        for s in specs
        if (c := classes.get(s.configuration_name)) is not None
    }
    judged = [s for s in specs if s.configuration_name in taken]
    orphans = set() if len(judged) < len(specs) else _taken_by_none(judged, taken)
    out: dict[str, dict[str, str] | ConfigurationError] = {}
    for spec in judged:
        rule = taken[spec.configuration_name]
        messages = [
            _message(key, spec, judged, taken)
            for key in spec.parameters
            if not rule.takes(key) and (key in spec.rule_only or key in orphans)
        ]
        out[spec.configuration_name] = (
            ConfigurationError("; ".join(messages))
            if messages
            else {k: v for k, v in spec.parameters.items() if rule.takes(k)}
        )
    return out


def check_parameters(cls: type, parameters: Mapping[str, str]) -> None:
    """Raise ``ConfigurationError`` if ``cls`` does not take every key of ``parameters``."""
    spec = RuleSpec(
        name=cls.__name__,
        configuration_name=cls.__name__,
        parameters=dict(parameters),
        rule_only=list(parameters),
    )
    error = route_parameters([spec], {cls.__name__: cls})[cls.__name__]
    if isinstance(error, ConfigurationError):
        raise error


def effective_parameters(
    cls: type, parameters: Mapping[str, str], fallback: Mapping[str, str]
) -> dict[str, str | None]:
    """Every parameter the rule was built with: the given value, else the environment's (named
    arguments only), else the signature's default as a string (None stays None)."""
    try:
        signature = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    except (TypeError, ValueError):
        return dict(parameters)
    out: dict[str, str | None] = {}
    for name in accepts(cls).names:
        default = signature[name].default
        fixed = None if default is None or default is inspect.Parameter.empty else str(default)
        out[name] = parameters.get(name, fallback.get(name, fixed))
    return {**out, **{k: v for k, v in parameters.items() if k not in out}}


def _taken_by_none(specs: Sequence[RuleSpec], taken: Mapping[str, Accepts]) -> set[str]:
    keys = {k for s in specs for k in s.parameters if k not in s.rule_only}
    return {
        k
        for k in keys
        if not any(taken[s.configuration_name].takes(k) for s in specs if k in s.parameters)
    }


def _message(
    key: str, spec: RuleSpec, specs: Sequence[RuleSpec], taken: Mapping[str, Accepts]
) -> str:
    alone = key in spec.rule_only or len(specs) == 1
    scope = [spec] if alone else list(specs)
    names = [n for s in scope for n in taken[s.configuration_name].names]
    close = difflib.get_close_matches(
        key, [*dict.fromkeys(names), *_SUGGESTABLE_KEYS], n=3, cutoff=0.6
    )
    hint = f"did you mean {' or '.join(map(repr, close))}?" if close else ""
    if alone:
        hint = f": {hint}" if hint else "."
        return (
            f"unknown parameter {key!r} for rule {_label(spec)}{hint} Its parameters: "
            f"{_names(taken[spec.configuration_name])}"
        )
    hint = f"; {hint}" if hint else "."
    listing = "; ".join(f"{_label(s)}: {_names(taken[s.configuration_name])}" for s in scope)
    return f"unknown parameter {key!r}: no rule of this run takes it{hint} Parameters: {listing}"


def _label(spec: RuleSpec) -> str:
    if spec.configuration_name == spec.name:
        return spec.name
    return f"{spec.configuration_name} ({spec.name})"


def _names(rule: Accepts) -> str:
    listed = ", ".join(rule.names) or "none"
    return listed + (" and any other key (**kwargs)" if rule.any_key else "")
