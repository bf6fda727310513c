"""Imports only run downward: each layer of the code imports its own and lower layers, never a
higher one (docs/architecture.md, "Layers"). Read from the source with ``ast``: every ``import`` and
``from ... import`` counts, function-level ones included."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. A module may import modules of its own layer and of the layers before it, and
# no two top-level packages import each other, in one layer or not (the package cycle test).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # compat only points smdebug.* names at its shim (shim modules sit above everything)
    (
        "base",
        (
            "evaluator.errors",
            "evaluator.modes",
            "evaluator.fileio",
            "evaluator.redaction",
            "evaluator.compat",
        ),
    ),
    ("formats", ("evaluator.formats", "evaluator.testing")),
    ("storage", ("evaluator.storage",)),
    # what every input format shares: trial state, caches, poller, waits, the seam (``Source``)
    ("engine", ("evaluator.engine",)),
    # the input formats, one package each, and their registry (evaluator.sources)
    ("sources", ("evaluator.sources",)),
    # the smdebug-compatible Trial / Tensor facade: it asks the registry, never a format
    ("trial", ("evaluator.trial", "evaluator.summary")),
    ("config", ("evaluator.config",)),
    ("rules", ("evaluator.rules",)),
    # the rule report: below the built-in rules, whose CreateXgboostReport draws with it
    ("report", ("evaluator.report",)),
    # the vocabulary of an outcome: statuses, messages, exit codes, status and result files
    ("status", ("evaluator.status",)),
    # the outputs of a run (log, result and message files, listeners, report, actions)
    ("sinks", ("evaluator.sinks",)),
    # the reporter that follows a run and tells the sinks
    ("reporting", ("evaluator.reporting",)),
    ("evaluation", ("evaluator.evaluation",)),
    # the built-in rules sit on the library, above all of evaluator/: the evaluation gets them
    # handed in by the command (``Evaluation(..., builtins=registry)``)
    ("rules_builtin", ("rules_builtin",)),
    ("container", ("container", "entrypoint")),
]
OURS = ("evaluator", "rules_builtin", "container", "entrypoint")

# Old import names kept for one release after their code moved up: (module, what it imports)
# -> why. Such an import must sit inside a function (the module's ``__getattr__``, which warns),
# so importing the module never loads the higher layer; remove the entry with the alias.
DEPRECATED_ALIASES: dict[tuple[str, str], str] = {
    ("evaluator.status", "evaluator.reporting"): "StatusReporter's name before it moved",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    if module == "evaluator":  # the package's __init__: its docstring and version
        return 0
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def _imported(node: ast.AST) -> set[str]:
    """The names an import statement brings in (``from a import b`` gives ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return set()


@cache
def all_imports_of(path: Path) -> frozenset[str]:
    """The modules of ours that ``path`` imports, deprecated aliases included (a package's
    ``__init__`` counts as the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set().union(*(_imported(node) for node in ast.walk(tree)))
    return frozenset(m for m in found if m.split(".")[0] in OURS)


@cache
def imports_of(path: Path) -> frozenset[str]:
    """What ``path`` imports, less its deprecated aliases (``DEPRECATED_ALIASES``)."""
    module = module_name(path)
    return frozenset(
        m
        for m in all_imports_of(path)
        if not any(module == a and _within(m, b) for a, b in DEPRECATED_ALIASES)
    )


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


SOURCES = sorted(
    p
    for folder in ("evaluator", "rules_builtin", "container")
    for p in (ROOT / folder).rglob("*.py")
    if "shim" not in p.parts
) + [ROOT / "entrypoint.py"]
MODULES = {module_name(p): p for p in SOURCES}


def test_every_module_has_a_layer() -> None:
    """Each module of ours belongs to exactly one layer of the list."""
    assert [m for m in MODULES if layer_of(m) is None] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_downward(module: str) -> None:
    """A module imports nothing from a layer above its own."""
    own = layer_of(module)
    assert own is not None
    upward = sorted(
        m for m in imports_of(MODULES[module]) if (layer := layer_of(m)) is not None and layer > own
    )
    assert upward == [], f"{module} ({LAYERS[own][0]}) imports upward: {upward}"


def reach(start: str) -> set[str]:
    """Every module of ours that importing ``start`` can load, transitively."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        candidates = [m for m in MODULES if name == m or name.startswith(m + ".")]
        for module in candidates:
            if module not in seen:
                seen.add(module)
                todo.extend(imports_of(MODULES[module]))
    return seen


def package_of(module: str) -> str:
    """The top-level package a module belongs to: ``evaluator.trial.reader`` ->
    ``evaluator.trial``, ``container.batch.jobs`` -> ``container``; a module directly under
    ``evaluator/`` is its own (``evaluator.modes``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "evaluator" and len(parts) > 1 else parts[0]


def package_graph() -> dict[str, set[str]]:
    """Which top-level packages each one imports (its own left out)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        for name in imports_of(path):
            known = [m for m in MODULES if _within(name, m)]
            if known and (target := package_of(max(known, key=len))) != package_of(module):
                graph.setdefault(package_of(module), set()).add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of nodes that reach each other through ``graph``'s edges (its strongly
    connected components of more than one node), each sorted."""
    reached = {start: _reachable(graph, start) for start in graph}
    groups = {
        tuple(sorted({a} | {b for b in reached[a] if a in reached.get(b, ())}))
        for a in reached
        if a in reached[a]
    }
    return sorted(list(group) for group in groups)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every node an edge path from ``start`` arrives at (``start`` itself only on a cycle)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_cycle_finder_finds_a_cycle_within_one_layer() -> None:
    """Two packages that import each other are a cycle even when they share a layer (where
    ``test_imports_run_downward`` lets both directions through), as is a longer ring."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_two_packages_import_each_other() -> None:
    """No top-level package reaches itself through another's imports: a layer may hold several
    packages, and one-way imports between them are what keeps the layer list honest."""
    assert cycles(package_graph()) == []


@pytest.mark.parametrize(("module", "target"), sorted(DEPRECATED_ALIASES))
def test_a_deprecated_alias_imports_only_on_first_use(module: str, target: str) -> None:
    """An old name kept after its code moved up imports the new place only inside a function,
    never when the module loads; an entry whose import is gone is removed."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    in_functions = {
        id(node)
        for func in ast.walk(tree)
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(func)
    }
    places = [
        id(node) in in_functions
        for node in ast.walk(tree)
        if any(_within(name, target) for name in _imported(node))
    ]
    assert places and all(places), f"{module} imports {target} outside a function, or not at all"


def test_the_trial_layer_never_reaches_the_configuration() -> None:
    """Nothing evaluator.trial, the engine or a format imports, directly or not, is
    evaluator.config."""
    below = ("evaluator.trial", "evaluator.engine", "evaluator.sources")
    reached = set().union(*(reach(m) for m in MODULES if m.startswith(below)))
    assert sorted(m for m in reached if m.startswith("evaluator.config")) == []


def test_the_library_never_imports_the_built_in_rules() -> None:
    """Nothing under evaluator/ (the rule framework, statuses, the evaluation) reaches
    rules_builtin, directly or not: the built-ins are handed in from container/."""
    reached = set().union(*(reach(m) for m in MODULES if m.split(".")[0] == "evaluator"))
    assert sorted(m for m in reached if m.startswith("rules_builtin")) == []


def test_the_built_in_rules_never_reach_the_evaluation_or_the_statuses() -> None:
    """A built-in rule is a rule like a user's: it never imports the evaluation that runs it, nor
    the statuses, their outputs or the reporter, nor the command (all but the command sit below
    it in the list)."""
    reached = set().union(*(reach(m) for m in MODULES if m.startswith("rules_builtin")))
    above_the_rules = (
        "evaluator.status",
        "evaluator.sinks",
        "evaluator.reporting",
        "evaluator.evaluation",
        "container",
        "entrypoint",
    )
    assert sorted(m for m in reached if m.startswith(above_the_rules)) == []


# The input formats: ``evaluator.sources.<format>`` packages, and the parsers that belong to one
# format alone (TensorBoard's; smdebug's index and record parsers).
FORMAT_PACKAGES = sorted(
    {m.split(".")[2] for m in MODULES if m.startswith("evaluator.sources.") and m.count(".") >= 2}
    - {"registry"}
)
FORMAT_PARSERS = {
    "tensorboard": ("evaluator.formats.tensorboard",),
    "smdebug": (
        "evaluator.formats.index_file",
        "evaluator.formats.record_plans",
        "evaluator.formats.record_values",
    ),
}


def format_of(module: str) -> str | None:
    """The format a module belongs to: its package under evaluator.sources, or its parser."""
    for name in FORMAT_PACKAGES:
        if module == f"evaluator.sources.{name}" or module.startswith(f"evaluator.sources.{name}."):
            return name
    for name, parsers in FORMAT_PARSERS.items():
        if any(module == p or module.startswith(p + ".") for p in parsers):
            return name
    return None


def test_the_formats_are_packages_of_their_own() -> None:
    """Both built-in formats are found as packages (so the two nevers below check something)."""
    assert {"smdebug", "tensorboard"} <= set(FORMAT_PACKAGES)


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m.startswith(("evaluator.trial", "evaluator.engine")))
)
def test_the_trial_api_and_the_engine_never_import_a_format(module: str) -> None:
    """A module of the Trial API (evaluator.trial) or of the engine every format shares
    (evaluator.engine) imports no format's package and no parser of one format: the facade
    asks the registry (evaluator.sources), and both speak the engine's seam."""
    found = sorted(m for m in imports_of(MODULES[module]) if format_of(m) is not None)
    assert found == [], f"{module} imports a format: {found}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if format_of(m) is not None))
def test_a_format_never_imports_another_format(module: str) -> None:
    """A format's modules import nothing of another format (its package or its parsers)."""
    own = format_of(module)
    found = sorted(m for m in imports_of(MODULES[module]) if format_of(m) not in (None, own))
    assert found == [], f"{module} ({own}) imports another format: {found}"


def test_the_watch_holds_no_rule_code() -> None:
    """``rule-evaluator watch`` runs every rule in a run's own process: nothing it imports
    reaches the rules, the built-ins or the evaluation that runs them."""
    reached = reach("container.watch")
    rule_code = ("rules_builtin", "evaluator.rules", "evaluator.evaluation", "evaluator.compat")
    assert sorted(m for m in reached if m.startswith(rule_code)) == []
    assert "container.watch.command" in reached  # the walk did follow the package
