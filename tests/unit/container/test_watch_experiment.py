"""The runs of an MLflow experiment as the watch finds them (container/watch/experiment.py):
named ``<experiment_id>/<run_id>`` with the MLflow run name as title, phase children left to
their parent, a look that never waits for a slow search, a failed search said as a problem
with the runs found before kept. MLflow's calls are replaced by plain functions here; the
integration tests run them on real stores."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from container.watch import experiment as module
from container.watch.experiment import ExperimentFinder
from evaluator.errors import ClientError
from evaluator.sources.mlflow.experiment import Experiment, ExperimentRun

EXPERIMENT = Experiment("http://host:5000", "7", "team")


class _Store:
    """What the searches answer: a list of runs, or a ClientError; ``gate`` holds a search."""

    def __init__(self) -> None:
        self.answer: list[ExperimentRun] | ClientError = []
        self.gate = threading.Event()
        self.gate.set()
        self.searches = 0

    def list_runs(self, client: Any, experiment: Experiment, *, deadline: float) -> Any:
        self.searches += 1
        self.gate.wait(10)
        if isinstance(self.answer, ClientError):
            raise self.answer
        return self.answer


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> _Store:
    found = _Store()
    monkeypatch.setattr(module, "store_client", lambda uri, *, deadline: object())
    monkeypatch.setattr(module, "find_experiment", lambda *a, **k: EXPERIMENT)
    monkeypatch.setattr(module, "list_runs", found.list_runs)
    return found


def _finder() -> ExperimentFinder:
    return ExperimentFinder("http://host:5000", "team", deadline=5)


def test_runs_are_named_by_experiment_and_id_and_phase_children_left_out(store: _Store) -> None:
    """A run is <experiment_id>/<run_id> at runs:/<run_id>, titled with its MLflow name; a
    child named train is its parent's, a sweep's child a run of its own."""
    store.answer = [
        ExperimentRun("a1", "resnet", "RUNNING", None),
        ExperimentRun("c1", "train", "RUNNING", "a1"),
        ExperimentRun("t1", "trial-3", "FINISHED", "a1"),
    ]
    finder = _finder()
    assert finder.find().runs == []  # the first search has only started
    assert finder.wait(5)
    runs = finder.find().runs
    assert [(r.name, r.location, r.title) for r in runs] == [
        ("7/a1", "runs:/a1", "resnet"),
        ("7/t1", "runs:/t1", "trial-3"),
    ]


def test_a_look_never_waits_for_a_slow_search_and_starts_one_at_a_time(store: _Store) -> None:
    """While a search hangs, looks answer at once with what was found before and start no
    second search."""
    store.answer = [ExperimentRun("a1", "x", "RUNNING", None)]
    finder = _finder()
    finder.find()
    assert finder.wait(5)
    store.gate.clear()
    finder.find()  # starts the search that hangs
    for _ in range(3):
        assert [r.name for r in finder.find().runs] == ["7/a1"]
    assert store.searches == 2 and not finder.wait(0.1)
    store.gate.set()
    assert finder.wait(5)


def test_a_failed_search_is_one_problem_and_the_runs_found_before_stay(store: _Store) -> None:
    """A search that fails is said by the next look, naming the experiment; the runs found
    by the search before are still given; once a search succeeds again, no problem."""
    store.answer = [ExperimentRun("a1", "x", "RUNNING", None)]
    finder = _finder()
    finder.find()
    assert finder.wait(5)
    store.answer = ClientError("MLflow search_runs on http://host:5000 failed: boom")
    finder.find()
    assert finder.wait(5)
    store.answer = [ExperimentRun("a1", "x", "RUNNING", None)]  # the store is back
    found = finder.find()
    assert [r.name for r in found.runs] == ["7/a1"]
    assert found.problems == [
        "MLflow experiment 'team' (id 7) in http://host:5000: "
        "MLflow search_runs on http://host:5000 failed: boom"
    ]
    assert finder.wait(5) and finder.find().problems == []


def _held(run: ExperimentRun, *children: ExperimentRun) -> str | None:
    found = module.held(run, list(children))
    return None if found is None else found.status


def test_a_run_without_metrics_is_held_until_it_has_some_or_ends() -> None:
    """No metrics and no child runs: Waiting while RUNNING, evaluated once it has a metric
    or has ended (the single run then says it ended without any)."""
    assert _held(ExperimentRun("a", "x", "RUNNING", None)) == "Waiting"
    assert _held(ExperimentRun("a", "x", "RUNNING", None, has_metrics=True)) is None
    assert _held(ExperimentRun("a", "x", "FINISHED", None)) is None


def test_a_sweeps_parent_is_held_as_a_parent_run_naming_its_children() -> None:
    """No metrics of its own and child runs of their own: ParentRun, whether running or
    ended, its message naming the children; phase children or metrics of its own make it a
    run to evaluate."""
    parent = ExperimentRun("p", "sweep", "RUNNING", None)
    trials = [ExperimentRun(f"t{i}", f"trial-{i}", "RUNNING", "p") for i in range(5)]
    found = module.held(parent, trials)
    assert found is not None and found.status == "ParentRun"
    assert "its 5 child run(s) (trial-0, trial-1, trial-2 and 2 more)" in found.message
    ended = ExperimentRun("p", "sweep", "FINISHED", None)
    assert _held(ended, *trials) == "ParentRun"
    val = ExperimentRun("c", "val", "RUNNING", "p")
    assert _held(parent, val, *trials) == "Waiting"  # its val run has logged nothing yet
    val = ExperimentRun("c", "val", "RUNNING", "p", has_metrics=True)
    assert _held(parent, val, *trials) is None
    assert _held(ExperimentRun("p", "s", "RUNNING", None, has_metrics=True), *trials) is None


def test_a_held_run_is_found_with_why(store: _Store) -> None:
    """The finder gives a sweep's parent and a quiet run with what holds them, the trials
    without."""
    store.answer = [
        ExperimentRun("p", "sweep", "RUNNING", None),
        ExperimentRun("t1", "trial-1", "RUNNING", "p", has_metrics=True),
        ExperimentRun("q", "quiet", "RUNNING", None),
    ]
    finder = _finder()
    finder.find()
    assert finder.wait(5)
    found = {r.name: r.held.status if r.held else None for r in finder.find().runs}
    assert found == {"7/p": "ParentRun", "7/t1": None, "7/q": "Waiting"}
