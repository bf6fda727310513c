"""Paths of the trials smdebug 1.0.34 wrote (tests/fixtures/smdebug_1_0_34), for parametrizing."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "smdebug_1_0_34"
DATA = FIXTURES / "data"
GOLDEN = FIXTURES / "golden"

SCENARIOS = sorted(p.name for p in DATA.iterdir() if p.is_dir())
EVENT_FILES = sorted(DATA.glob("*/events/*/*.tfevents"))
INDEX_FILES = sorted(DATA.glob("*/index/*/*.json"))
COLLECTION_FILES = sorted(DATA.glob("*/collections/000000000/*_collections.json"))


def file_id(path: Path) -> str:
    """A short test id: the path below data/."""
    return str(path.relative_to(DATA))
