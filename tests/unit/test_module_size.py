"""Sizes that show a module or function doing several jobs (docs/architecture.md; docs/STYLE:
one job per module, functions short).

A module is as long as its one job needs: over 400 lines it must be on ``LONG_MODULES`` with
the reason it is still one job (a cohesive module is never cut across files to fit a number).
A function is at most 80 lines: a longer one is on ``LONG_FUNCTIONS`` with its reason, or is
split where it does several things. Counted over the package (evaluator/, rules_builtin/,
container/, entrypoint.py), the benchmarks (bench/), the tools (tools/) and tests/support/;
the rest of tests/ holds lists of cases, whose length is the number of cases.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
MAX_FUNCTION_LINES = 80
FOLDERS = ("evaluator", "rules_builtin", "container", "bench", "tools", "tests/support")
FILES = ("entrypoint.py",)

#: Modules over MAX_LINES, each with why it is one job.
LONG_MODULES = {
    "container/supervisor.py": "one job, the supervised run's one loop: the child's pipes, "
    "signals with their senders, deadlines, reaping, and the last word; standard library only, "
    "imported before anything else, so its parts are not spread over modules",
    "container/help.py": "one job, the command's own help (--help, --help-env, rules NAME): "
    "the bulk is the table of flags, one entry per setting",
    "evaluator/sources/tensorboard/source.py": "one job, a TensorBoard run as a Source: "
    "discovering its files and mapping the run, tailing them, handing on each scan's steps; "
    "the mapping rules, records and columns already live in layout, steps and columns",
}

#: Functions over MAX_FUNCTION_LINES (``path:name``), each with why it stays whole.
LONG_FUNCTIONS = {
    "tools/make_hook_trials/pytorch_trials.py:run": "a training script: the real hook's "
    "training loop written out as a user writes it, read top to bottom beside smdebug's docs",
    "tools/make_hook_trials/keras_trials.py:run": "a training script, as pytorch_trials.run",
    "tools/make_hook_trials/pytorch_architectures.py:run": "a training script, as "
    "pytorch_trials.run",
    "tools/make_hook_trials/pytorch_idioms.py:run": "a training script, as pytorch_trials.run",
    "tools/make_hook_trials/keras_architectures.py:run": "a training script, as pytorch_trials.run",
    "bench/runner/live_runs.py:run_live_once": "one timed live run: writer and reader "
    "processes started, paced and reaped in one place so their clocks stay comparable",
    "bench/runner/report_rules.py:report_rules": "one report table, row by row",
    "bench/runner/cli.py:build_parser": "the command line's flags, one add_argument each",
    "bench/smdebug_standins.py:install": "the stand-in modules, one assignment each",
    "bench/runner/local_runs.py:run_workloads": "one alternating run of every side, whose "
    "order is the measurement's design",
    "bench/rules_workload.py:run": "the timed body of one workload process, kept in one frame "
    "so that nothing but the rules runs between the clock's reads",
    "bench/mixed_trial.py:write": "the rules trial's values, one tensor each, in step order",
    "bench/runner/report.py:_per_workload": "one report table, row by row",
    "bench/workloads.py:run": "the timed body of one workload process, as rules_workload.run",
    "bench/make_trial.py:main": "the trial writer's steps in the order smdebug's writer needs",
    "evaluator/rules/evidence.py:compare": "the recording hot path, run for every comparison "
    "of every rule: the series and closest-approach updates are inlined on purpose (a third "
    "of it is its docstring)",
}


def _generated(path: Path) -> bool:
    return path.name.endswith("_pb2.py") or path.name.endswith("_pb2.pyi")


def _counted(path: Path) -> bool:
    return not _generated(path) and ".work" not in path.relative_to(ROOT).parts


def counted_paths() -> list[Path]:
    paths = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    paths += [ROOT / name for name in FILES]
    return [p for p in paths if _counted(p)]


def line_counts() -> dict[str, int]:
    """Lines of every counted module, by path relative to the checkout (as ``wc -l``)."""
    return {p.relative_to(ROOT).as_posix(): p.read_bytes().count(b"\n") for p in counted_paths()}


def function_lengths() -> dict[str, int]:
    """Lines of every function and method (decorators included), by ``path:name``; the
    longest of a name in one module counts."""
    found: dict[str, int] = {}
    for path in counted_paths():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno is not None
                key = f"{path.relative_to(ROOT).as_posix()}:{node.name}"
                found[key] = max(found.get(key, 0), node.end_lineno - start + 1)
    return found


def test_a_long_module_says_why_it_is_one_job() -> None:
    """Every module over 400 lines is on LONG_MODULES, with a reason."""
    over = sorted(
        f"{path} ({n} lines)"
        for path, n in line_counts().items()
        if n > MAX_LINES and path not in LONG_MODULES
    )
    assert over == [], f"modules over {MAX_LINES} lines: split them by job or say why not: {over}"


def test_no_function_is_over_80_lines() -> None:
    """Every function over 80 lines is on LONG_FUNCTIONS, with a reason."""
    over = sorted(
        f"{key} ({n} lines)"
        for key, n in function_lengths().items()
        if n > MAX_FUNCTION_LINES and key not in LONG_FUNCTIONS
    )
    assert over == [], f"functions over {MAX_FUNCTION_LINES} lines: split them: {over}"


def test_the_allow_lists_hold_only_what_they_need() -> None:
    """Every entry is still over its limit and gives a reason: a module or function that was
    split, shortened or renamed leaves the list."""
    lines, lengths = line_counts(), function_lengths()
    stale = [p for p in LONG_MODULES if lines.get(p, 0) <= MAX_LINES]
    stale += [k for k in LONG_FUNCTIONS if lengths.get(k, 0) <= MAX_FUNCTION_LINES]
    assert stale == []
    assert all(len(why) > 20 for why in [*LONG_MODULES.values(), *LONG_FUNCTIONS.values()])


def test_every_folder_is_counted() -> None:
    """The count sees the package, the benchmarks, the tools and the entry point (a renamed
    folder cannot silently drop out of the check), down to the real-hook trial scripts."""
    counts = line_counts()
    tops = {path.split("/")[0] for path in counts}
    assert {"evaluator", "rules_builtin", "container", "bench", "tools", "entrypoint.py"} <= tops
    assert "bench/workloads.py" in counts
    assert "tools/make_hook_trials/keras_trials.py" in counts
    assert "tools/make_hook_trials/pytorch_trials.py" in counts
    assert "evaluator/trial/tensor.py:value" in function_lengths()
