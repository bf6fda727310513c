"""The input formats' registry: detection by listed keys in registration order, a format named
by trial_format, plug-ins from the entry-point group, and clear errors for unknown names."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from evaluator.engine.options import TrialOptions
from evaluator.engine.runner import get_loop
from evaluator.errors import ConfigurationError
from evaluator.sources import registry
from evaluator.sources.smdebug import SmdebugSource
from evaluator.sources.tensorboard import TensorBoardSource
from evaluator.storage import MemoryStorage


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A registry that loads the built-ins and the given entry points anew."""
    monkeypatch.setattr(registry, "_formats", {})
    monkeypatch.setattr(registry, "_failed", {})
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    yield


def _with_entry_points(monkeypatch: pytest.MonkeyPatch, *points: EntryPoint) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda *, group: list(points))


def _detect(keys: list[str], trial_format: str = "auto") -> str:
    storage = MemoryStorage(uri="memory://t")
    for key in keys:
        storage.put(key, b"x")
    options = TrialOptions(trial_format=trial_format)
    return str(get_loop().run(registry.detect_kind(storage, options)))


def test_the_first_registered_format_a_key_shows_wins(fresh: None) -> None:
    """smdebug's keys win over event files anywhere in the listing; event files alone are a
    TensorBoard log; a location that shows no format is smdebug's."""
    tb = "run/events.out.tfevents.1.host"
    assert _detect([tb, "index/000000000/000000000000_worker_0.json"]) == "smdebug"
    assert _detect([tb, "notes.txt"]) == "tensorboard"
    assert _detect(["notes.txt"]) == "smdebug"
    assert _detect([]) == "smdebug"


def test_a_named_format_is_used_without_listing(fresh: None) -> None:
    """trial_format=tensorboard is taken as given, whatever the keys show."""
    assert _detect(["collections/000000000/worker_0_collections.json"], "tensorboard") == (
        "tensorboard"
    )


def test_make_source_opens_the_format_named(fresh: None) -> None:
    """The registry opens each built-in format's own source."""
    options, storage = TrialOptions(), MemoryStorage(uri="memory://t")
    assert isinstance(registry.make_source("smdebug", storage, options), SmdebugSource)
    assert isinstance(registry.make_source("tensorboard", storage, options), TensorBoardSource)


def test_an_unknown_format_names_the_known_ones(fresh: None) -> None:
    """An unknown trial_format is a ConfigurationError listing auto and every known format."""
    with pytest.raises(ConfigurationError, match=r"unknown trial_format 'wandb'.*auto, smdebug"):
        registry.check_kind("wandb")
    registry.check_kind("auto")
    registry.check_kind("tensorboard")


def test_a_plug_in_registers_through_its_entry_point(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry point of the group naming a SourceFormat adds it after the built-ins: it is
    known by name and detected by its keys."""
    _with_entry_points(
        monkeypatch,
        EntryPoint("lines", f"{__name__}:LINES", registry.ENTRY_POINT_GROUP),
    )
    assert registry.known_kinds() == ["smdebug", "tensorboard", "trainer_state", "mlflow", "lines"]
    assert _detect(["a.lines"]) == "lines"
    assert _detect(["a.lines", "run/events.out.tfevents.1.host"]) == "tensorboard"


def test_a_broken_plug_in_leaves_the_others_and_is_named_when_asked_for(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plug-in that fails to import, or names something else than a SourceFormat, is left
    out with a warning; asking for it by name says why it is missing."""
    _with_entry_points(
        monkeypatch,
        EntryPoint("gone", "no_such_module_here:FORMAT", registry.ENTRY_POINT_GROUP),
        EntryPoint("odd", f"{__name__}:NOT_A_FORMAT", registry.ENTRY_POINT_GROUP),
    )
    assert registry.known_kinds() == ["smdebug", "tensorboard", "trainer_state", "mlflow"]
    with pytest.raises(ConfigurationError, match="'gone' failed to load: ModuleNotFoundError"):
        registry.check_kind("gone")
    with pytest.raises(ConfigurationError, match="'odd' failed to load: .* not a SourceFormat"):
        registry.check_kind("odd")


def test_a_format_name_is_one_word() -> None:
    """register_source refuses auto and names that are not one word."""
    for bad in ("auto", "", "two words", "a/b"):
        with pytest.raises(ValueError, match="a format's name"):
            registry.register_source(bad, lambda key: False, _never)


def _never(storage: Any, options: Any) -> Any:
    raise AssertionError("never opened")


LINES = registry.SourceFormat("lines", lambda key: key.endswith(".lines"), _never)
NOT_A_FORMAT = object()


def test_the_entry_points_are_read_only_when_a_built_in_cannot_answer(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening smdebug output or a TensorBoard log never scans the installed packages for
    plug-ins (about 30 ms a trial); a location no built-in claims, or an unknown name, does."""
    asked: list[str] = []

    def points(*, group: str) -> list[EntryPoint]:
        asked.append(group)
        return [EntryPoint("lines", f"{__name__}:LINES", group)]

    monkeypatch.setattr(registry, "entry_points", points)
    assert _detect(["collections/000000000/worker_0_collections.json"]) == "smdebug"
    assert _detect(["a.lines", "run/events.out.tfevents.1.host"]) == "tensorboard"
    registry.check_kind("tensorboard")
    assert asked == []
    assert _detect(["a.lines"]) == "lines"
    assert asked == [registry.ENTRY_POINT_GROUP]


def test_a_location_of_a_formats_own_form_opens_without_a_storage(fresh: None) -> None:
    """runs:/<run_id> is an MLflow run: opened by the mlflow format itself (no storage under
    it); a malformed one, or another trial_format, is a ConfigurationError naming the form;
    a folder or an S3 prefix is no such location."""
    assert registry.location_format("runs:/0123abcd") is not None
    assert registry.location_format("./runs") is None
    assert registry.location_format("s3://b/runs:/x") is None
    assert registry.check_location_form("base_trial", "runs:/0123abcd/")
    assert not registry.check_location_form("base_trial", "/data/trial")
    with pytest.raises(ConfigurationError, match=r"base_trial must be runs:/<run_id>"):
        registry.check_location_form("base_trial", "runs:/a b")
    with pytest.raises(ConfigurationError, match="trial_format 'tensorboard' cannot read"):
        registry.open_location("runs:/0123abcd", TrialOptions(trial_format="tensorboard"))
    with pytest.raises(ConfigurationError, match="--mlflow-tracking-uri"):
        registry.open_location("runs:/0123abcd", TrialOptions())
    assert _detect(["meta.yaml", "metrics/loss", "params/lr"]) == "mlflow"
