"""The README is a doorway and the docs hold together: the README stays short and opens with the
two commands CI runs, docs/index.md lists every page, every relative link of the README and of
docs/ reaches a file (and a heading, when it names one), and the docs' table of tuning variables
is complete."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from evaluator.config import TRIAL_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 200

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    """The link targets of a Markdown page, outside its code blocks."""
    return _LINK.findall(_FENCE.sub("", page.read_text(encoding="utf-8")))


def _anchors(page: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown page (a repeated one gets -1, -2, ...)."""
    seen: Counter[str] = Counter()
    anchors = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        anchors.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return anchors


def _broken(page: Path) -> list[str]:
    broken = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    return broken


def test_readme_is_at_most_200_lines() -> None:
    """README.md is a doorway: at most 200 lines, the rest in docs/."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES


def test_readme_opens_with_the_run_command_and_the_test_command_ci_runs() -> None:
    """The README's first two code lines set up and run a rule on the bundled trial, then run
    the tests; .ci/run ends with exactly that test command."""
    text = README.read_text(encoding="utf-8")
    head = text[: text.index("\n## ")]
    run, test = [line.strip() for line in head.splitlines() if line.startswith("    ")]
    trial = re.search(r"--trial-dir (\S+)", run)
    assert trial is not None and (ROOT / trial[1]).is_dir()
    assert run.startswith("python3 -m venv .venv && .venv/bin/pip install -e . && ")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == test == ".venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"


def test_docs_index_lists_every_page() -> None:
    """docs/index.md links every Markdown page of docs/."""
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in _links(DOCS / "index.md")}
    pages = {p.resolve() for p in DOCS.glob("*.md") if p.name != "index.md"}
    assert sorted(p.name for p in pages - linked) == []


@pytest.mark.parametrize(
    "page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: str(p.relative_to(ROOT))
)
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link of the page reaches an existing file, and a heading of it when the
    link names one."""
    assert _broken(page) == []


def test_docs_table_names_every_tuning_variable() -> None:
    """docs/configuration.md's table of trial options names every tuning environment variable
    (those `rule-evaluator --help-env` prints)."""
    rows = [
        line
        for line in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| `")
    ]
    assert [v for v in TRIAL_ENVIRONMENT if not any(f"`{v}`" in row for row in rows)] == []
