"""Every module of the package is under 400 lines (README, "Development": small modules with
one job). Counted as ``wc -l`` does: newline characters."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
FOLDERS = ("evaluator", "rules_builtin", "container")


def _generated(path: Path) -> bool:
    return path.name.endswith("_pb2.py") or path.name.endswith("_pb2.pyi")


def line_counts() -> dict[str, int]:
    """Lines of every Python module under FOLDERS, by path relative to the checkout."""
    counts: dict[str, int] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if _generated(path):
                continue
            counts[path.relative_to(ROOT).as_posix()] = path.read_bytes().count(b"\n")
    return counts


def test_every_module_is_under_the_limit() -> None:
    """No module of evaluator/, rules_builtin/ or container/ has more than 400 lines."""
    over = sorted(f"{path} ({n} lines)" for path, n in line_counts().items() if n > MAX_LINES)
    assert over == [], f"modules over {MAX_LINES} lines: split them by job: {over}"
