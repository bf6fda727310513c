"""Many trials: their output folder names, and the trial of a Kubernetes Indexed Job's pod
(``evaluator.config.trial_list``, and ``load_config`` reading it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.config import load_config
from evaluator.config.trial_list import listed_trial, parse_trial_list, trial_names
from evaluator.errors import ConfigurationError


def test_names_are_the_last_segment_or_the_job_before_debug_output() -> None:
    """A trial is named by its last path segment, or by the job folder before SageMaker's
    debug-output."""
    assert trial_names(
        ["s3://b/jobs/mnist-42/debug-output", "/data/run-7", "file:///x/y/run-8/", "rel"]
    ) == ["mnist-42", "run-7", "run-8", "rel"]


def test_colliding_names_take_the_segments_before_until_they_differ() -> None:
    """Trials whose names collide get as many segments before as needed, joined by _; the
    others keep their short names."""
    names = trial_names(
        ["s3://a/team1/job/debug-output", "s3://a/team2/job/debug-output", "s3://a/other"]
    )
    assert names == ["team1_job", "team2_job", "other"]
    assert trial_names(["s3://bucket-1/job", "s3://bucket-2/job"]) == [
        "bucket-1_job",
        "bucket-2_job",
    ]


def test_unsafe_characters_become_underscores_and_names_stay_distinct() -> None:
    """Characters other than letters, digits, . _ - become _, and trials that differ only in
    those still get distinct names."""
    names = trial_names(["/d/a b", "/d/a?b"])
    assert trial_names(["/d/a b"]) == ["a_b"]
    assert len(set(names)) == 2 and all(set(n) <= set("abd_-2") for n in names), names


def test_a_trial_listed_twice_is_refused() -> None:
    """The same trial twice is a ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="listed twice"):
        trial_names(["s3://b/x", "s3://b/x/"])


def test_list_formats() -> None:
    """One trial per line (blank lines and # comments skipped), or comma-separated on one."""
    assert parse_trial_list("# fleet\ns3://b/a\n\n s3://b/c \n") == ["s3://b/a", "s3://b/c"]
    assert parse_trial_list("s3://b/a, s3://b/c") == ["s3://b/a", "s3://b/c"]


def test_the_index_picks_the_trial_and_its_name(tmp_path: Path) -> None:
    """JOB_COMPLETION_INDEX picks the line of EVALUATOR_TRIALS or EVALUATOR_TRIALS_FILE."""
    env = {"EVALUATOR_TRIALS": "s3://b/j1/debug-output\ns3://b/j2/debug-output"}
    listed = listed_trial({**env, "JOB_COMPLETION_INDEX": "1"})
    assert listed is not None and (listed.trial, listed.name) == ("s3://b/j2/debug-output", "j2")
    listing = tmp_path / "trials.txt"
    listing.write_text("s3://b/j1\ns3://b/j2\n")
    listed = listed_trial({"EVALUATOR_TRIALS_FILE": str(listing), "JOB_COMPLETION_INDEX": "0"})
    assert listed is not None and listed.name == "j1" and str(listing) in listed.source
    assert listed_trial({"JOB_COMPLETION_INDEX": "3"}) is None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"EVALUATOR_TRIALS": "s3://b/a"}, "JOB_COMPLETION_INDEX is not set"),
        ({"EVALUATOR_TRIALS": "s3://b/a", "JOB_COMPLETION_INDEX": "x"}, "is 'x'"),
        ({"EVALUATOR_TRIALS": "s3://b/a", "JOB_COMPLETION_INDEX": "1"}, "completions"),
        ({"EVALUATOR_TRIALS": "# none\n", "JOB_COMPLETION_INDEX": "0"}, "lists no trial"),
        ({"EVALUATOR_TRIALS_FILE": "/no/such/list", "JOB_COMPLETION_INDEX": "0"}, "cannot read"),
        (
            {"EVALUATOR_TRIALS": "s3://b/a", "EVALUATOR_TRIALS_FILE": "/x"},
            "give the trial list once",
        ),
    ],
)
def test_bad_lists_say_what_to_fix(env: dict[str, str], expected: str) -> None:
    """A list without an index, an index out of range, an empty or unreadable list: a
    ConfigurationError saying what to fix."""
    with pytest.raises(ConfigurationError, match=expected):
        listed_trial(env)


def test_load_config_takes_the_listed_trial_and_its_output_folder(tmp_path: Path) -> None:
    """With a trial list and an index, the run's trial is the listed one and its outputs go to
    <output_dir>/<trial name>; a base_trial given as well is refused."""
    env = {
        "EVALUATOR_TRIALS": "s3://b/jobs/mnist-41/debug-output\ns3://b/jobs/mnist-42/debug-output",
        "JOB_COMPLETION_INDEX": "1",
        "rule_to_invoke": "VanishingGradient",
        "output_dir": str(tmp_path / "results"),
    }
    config = load_config([], env, opt_ml_root=tmp_path / "opt_ml")
    assert config.base_trial == "s3://b/jobs/mnist-42/debug-output"
    assert config.output_dir == tmp_path / "results" / "mnist-42"
    assert "JOB_COMPLETION_INDEX" in config.trial_source
    with pytest.raises(ConfigurationError, match="give one or the other"):
        load_config(["--trial-dir", "s3://b/x"], env, opt_ml_root=tmp_path / "opt_ml")


def test_an_indexed_jobs_output_folder_is_a_safe_name(tmp_path: Path) -> None:
    """A pod whose listed trial ends in '..' writes in a folder of the output, not its parent."""
    env = {
        "EVALUATOR_TRIALS": "s3://b/jobs/..\ns3://b/jobs/index.html",
        "JOB_COMPLETION_INDEX": "0",
    }
    names = []
    for index in ("0", "1"):
        listed = listed_trial({**env, "JOB_COMPLETION_INDEX": index})
        assert listed is not None
        names.append(listed.name)
    assert names == ["_..", "_index.html"]
