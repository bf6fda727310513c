"""The runs under a watched root (container/discovery.py): smdebug trials and TensorBoard
runs with their phase folders, nested, the output folder and hidden folders skipped, run
paths that would leave the output refused, and stable shards."""

from __future__ import annotations

from pathlib import Path

from container.discovery import RunFinder, in_shard, safe_name


def _event_file(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"")


def test_tensorboard_runs_smdebug_trials_and_phase_folders_are_found(tmp_path: Path) -> None:
    """A run with train/ and validation/ folders is one run; an smdebug trial is a run and is
    not looked into; nested runs keep their path; hparams folders, hidden folders, plain
    folders and the output folder inside the root are not runs."""
    root = tmp_path / "runs"
    _event_file(root / "team" / "a" / "train")
    _event_file(root / "team" / "a" / "validation")
    _event_file(root / "b")
    _event_file(root / "b" / "1700000000.5")  # torch's add_hparams
    (root / "job" / "debug-output" / "index").mkdir(parents=True)
    _event_file(root / "job" / "debug-output" / "events" / "deep")  # inside the trial
    _event_file(root / "ended" / "events" / "x")  # inside a trial known by its end marker
    (root / "ended" / "training_job_end.ts").write_text("")
    _event_file(root / ".hidden")
    (root / "empty").mkdir()
    _event_file(root / "out" / "x")  # the output folder: never a run
    found = RunFinder(str(root), skip=root / "out").find()
    assert {r.name: r.location for r in found.runs} == {
        "team/a": f"{root}/team/a",
        "b": f"{root}/b",
        "job/debug-output": f"{root}/job/debug-output",
        "ended": f"{root}/ended",
    }
    assert found.problems == []


def test_a_root_that_is_a_run_is_named_by_its_last_segment(tmp_path: Path) -> None:
    """ROOT itself holding event files is one run, named after ROOT's folder."""
    _event_file(tmp_path / "exp1")
    (run,) = RunFinder(str(tmp_path / "exp1")).find().runs
    assert (run.name, run.location) == ("exp1", str(tmp_path / "exp1"))


def test_a_folder_that_cannot_be_listed_is_a_problem_not_a_failure(tmp_path: Path) -> None:
    """A root that vanished is reported as a problem; nothing raises."""
    found = RunFinder(str(tmp_path / "gone")).find()
    assert found.runs == [] and len(found.problems) == 1


def test_run_paths_that_would_leave_the_output_are_refused() -> None:
    """``..``, ``.``, empty segments and backslashes are not safe run paths."""
    assert safe_name("team/a") and safe_name("run-1")
    for name in ("..", "a/../b", "./a", "a//b", "a\\b", "/a"):
        assert not safe_name(name), name


def test_shards_split_the_runs_once_and_stably() -> None:
    """Every run is in exactly one of N shards, the same one every time, and the shards are
    of about equal size."""
    names = [f"team-{t}/run-{r}" for t in range(10) for r in range(100)]
    sizes = [sum(in_shard(n, (i, 4)) for n in names) for i in range(4)]
    assert sum(sizes) == len(names) and min(sizes) > 200
    assert all(in_shard(n, (0, 1)) for n in names)
    assert in_shard("team-1/run-7", (2, 4)) == in_shard("team-1/run-7", (2, 4))
