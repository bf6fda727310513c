"""What a built-in rule is, in words: one source for docs/rules.md and ``rule-evaluator rules``.

Everything comes from the rule itself: the one-line summary is its module docstring's first line
(``"VanishingGradient: gradients whose ..."``), the description its class docstring, the
parameters its ``PARAMETERS``; what it reads, its windows and earliest firing from
``rules_builtin._timing``. ``markdown_section`` renders a rule for tools/gen_rules_doc.py,
``text_section`` for the terminal (short, or whole with ``verbose``), from the same ``parameters`` and ``default_text``.
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
import sys
from collections.abc import Sequence

from evaluator.rules.kit.params import Param
from rules_builtin import registry
from rules_builtin._timing import DETECTION
from rules_builtin.kit import HELPER_MODULES

__all__ = [
    "as_own_rule",
    "default_text",
    "description",
    "example_parameters",
    "markdown_section",
    "module_source",
    "parameters",
    "rule_class",
    "summary",
    "text_section",
]


def rule_class(name: str) -> type:
    """The built-in rule class named ``name`` (any case); KeyError if there is none."""
    cls = registry.lookup(name)
    if cls is None:
        raise KeyError(name)
    return cls


def module_source(name: str) -> str:
    """The source of the module that defines the built-in rule ``name`` (any case), ready to
    run as a rule of your own (``rule-evaluator rules NAME --source``): its imports of the
    built-ins' private helpers point at their public names (``rules_builtin.kit``), and its
    registration as a built-in (``@register``) becomes ``@records_comparisons``, which keeps
    what the registration gave the class. Nothing else changes, so the copy judges a trial as
    the built-in does."""
    return as_own_rule(inspect.getsource(sys.modules[rule_class(name).__module__]))


_REGISTER_IMPORT = re.compile(r"^from rules_builtin\.registry import register\n", re.M)
_REGISTER = re.compile(r"^@register$", re.M)
_HELPER_IMPORT = re.compile(rf"^from rules_builtin\.({'|'.join(HELPER_MODULES)}) import ", re.M)


def as_own_rule(source: str) -> str:
    """A built-in rule module's ``source`` rewritten for a user's rule file (``module_source``)."""
    source = _REGISTER_IMPORT.sub("from rules_builtin.kit import records_comparisons\n", source)
    source = _REGISTER.sub("@records_comparisons", source)
    return _HELPER_IMPORT.sub("from rules_builtin.kit import ", source)


def summary(cls: type) -> str:
    """What the rule detects, in one line: its module docstring's first line, name removed."""
    module = sys.modules[cls.__module__]
    first = (module.__doc__ or cls.__doc__ or "").strip().splitlines()[0].strip()
    prefix = f"{cls.__name__}:"
    first = first[len(prefix) :].strip() if first.startswith(prefix) else first
    return first.replace("``", "")


def description(cls: type) -> str:
    """The class docstring, dedented."""
    return inspect.cleandoc(cls.__doc__ or "").strip()


def parameters(cls: type) -> Sequence[Param]:
    params: Sequence[Param] = getattr(cls, "PARAMETERS", ())
    return params


def default_text(param: Param, *, code: str = "") -> str:
    """The default as shown: required, none (not set), or the string SageMaker would send,
    wrapped in ``code`` (a backquote for Markdown)."""
    if param.required:
        return "required"
    return "none" if param.default is None else f"{code}{param.default}{code}"


def example_parameters(cls: type) -> dict[str, str]:
    """``RuleParameters`` that run the rule with its defaults spelled out."""
    example = {"rule_to_invoke": cls.__name__}
    example.update(
        {p.name: p.default for p in parameters(cls) if p.default is not None and not p.required}
    )
    return example


def markdown_section(name: str) -> str:
    """The rule's section of docs/rules.md."""
    cls = rule_class(name)
    lines = [f"## {name}", "", description(cls), ""]
    timing = DETECTION.get(cls.__name__)
    if timing is not None:  # what it reads, what it waits for, how early it can fire
        reads, windows, earliest = (t.replace("|", "&#124;") for t in timing)
        lines += ["| reads | windows | earliest firing |", "|---|---|---|"]
        lines += [f"| {reads} | {windows} | {earliest} |", ""]
    params = parameters(cls)
    if params:
        lines += ["| parameter | default | type | meaning |", "|---|---|---|---|"]
        for p in params:
            lines.append(f"| `{p.name}` | {default_text(p, code='`')} | {p.kind} | {p.doc} |")
        lines.append("")
    example = json.dumps(example_parameters(cls), indent=2)
    lines += ["Example `RuleParameters`:", "", "```json", example, "```", ""]
    return "\n".join(lines)


def text_section(name: str, *, program: str = "rule-evaluator", verbose: bool = False) -> str:
    """The rule for a terminal (``rules NAME``): what it detects (its summary and the first
    paragraph of its description), one line per parameter, an example command, and where the
    rest is. ``verbose``: the whole description, and each parameter's meaning on a line of its
    own."""
    cls = rule_class(name)
    rule = cls.__name__
    text = description(cls)
    lines = [f"{rule}: {summary(cls)}", "", text if verbose else text.split("\n\n")[0], ""]
    lines += _parameter_lines(parameters(cls), verbose=verbose)
    flags = " ".join(
        f"--{k} {shlex.quote(v)}"
        for k, v in example_parameters(cls).items()
        if k != "rule_to_invoke"
    )
    lines += [
        "",
        "Example:",
        f"  {program} --trial-dir PATH_OR_S3_URI --rule {rule}" + (f" {flags}" if flags else ""),
        "",
    ]
    if not verbose:
        lines.append(f"The full description: {program} rules {rule} --verbose")
    lines.append(f"More: docs/rules.md#{rule.lower()}")
    return "\n".join(lines).replace("``", "")  # reST's code marks are noise on a terminal


def _parameter_lines(params: Sequence[Param], *, verbose: bool) -> list[str]:
    """Each parameter's name, type and default, and its meaning: on the same line, or with
    ``verbose`` on the next."""
    if not params:
        return ["Parameters: none."]
    lines = ["Parameters (every value is a string, as SageMaker sends it):"]
    width = max(len(p.name) for p in params) + 2
    heads = [f"  --{p.name.ljust(width)}{p.kind}, default {default_text(p)}" for p in params]
    head_width = max(len(h) for h in heads) + 2
    for head, p in zip(heads, params, strict=True):
        lines += [head, f"    {p.doc}"] if verbose else [f"{head.ljust(head_width)}{p.doc}"]
    return lines
