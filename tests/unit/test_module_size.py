"""Every module of the project is under 400 lines (docs/architecture.md, "Small modules,
one job each"): the package (evaluator/, rules_builtin/, container/, entrypoint.py), the benchmarks
(bench/) and the tools (tools/). Counted as ``wc -l`` does: newline characters.

The rest of tests/ is left out: its long files are lists of cases of one subject (a decorated
case per bad input in test_bad_inputs.py, one short test per behaviour of one rule or of one
command), whose length is the number of cases, not a module doing several jobs; their harnesses
live in tests/support/, which is counted."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
FOLDERS = ("evaluator", "rules_builtin", "container", "bench", "tools", "tests/support")
FILES = ("entrypoint.py",)


def _generated(path: Path) -> bool:
    return path.name.endswith("_pb2.py") or path.name.endswith("_pb2.pyi")


def _counted(path: Path) -> bool:
    return not _generated(path) and ".work" not in path.relative_to(ROOT).parts


def line_counts() -> dict[str, int]:
    """Lines of every Python module under FOLDERS and of FILES, by path relative to the
    checkout."""
    paths = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    paths += [ROOT / name for name in FILES]
    return {
        p.relative_to(ROOT).as_posix(): p.read_bytes().count(b"\n") for p in paths if _counted(p)
    }


def test_every_module_is_under_the_limit() -> None:
    """No module of the package, bench/, tools/ or tests/support/ has more than 400 lines."""
    counts = line_counts()
    over = sorted(f"{path} ({n} lines)" for path, n in counts.items() if n > MAX_LINES)
    assert over == [], f"modules over {MAX_LINES} lines: split them by job: {over}"


def test_every_folder_is_counted() -> None:
    """The count sees the package, the benchmarks, the tools and the entry point (a renamed
    folder cannot silently drop out of the check), down to the real-hook trial scripts."""
    counts = line_counts()
    tops = {path.split("/")[0] for path in counts}
    assert {"evaluator", "rules_builtin", "container", "bench", "tools", "entrypoint.py"} <= tops
    assert "bench/workloads.py" in counts
    assert "tools/make_hook_trials/keras_trials.py" in counts
    assert "tools/make_hook_trials/pytorch_trials.py" in counts
