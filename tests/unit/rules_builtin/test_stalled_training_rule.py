"""StalledTrainingRule: waiting at the newest step, firing after threshold seconds, stopping
the training job, and parameter errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.rules import Termination, invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from rules_builtin import registry
from rules_builtin.stalled_training_rule import StalledTrainingRule


class FakeClock:
    """A clock that only moves when the rule sleeps; ``on_sleep`` runs after each sleep."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps = 0
        self.on_sleep: Callable[[int], None] = lambda n: None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.sleeps)


class StubSageMaker:
    """A boto3 SageMaker client that lists the given InProgress jobs and records stops."""

    def __init__(self, jobs: list[str]) -> None:
        self.jobs = jobs
        self.stopped: list[str] = []
        self.listed = 0

    def list_training_jobs(self, **request: Any) -> dict[str, Any]:
        self.listed += 1
        names = [j for j in self.jobs if request["NameContains"] in j]
        return {"TrainingJobSummaries": [{"TrainingJobName": n} for n in names]}

    def stop_training_job(self, TrainingJobName: str) -> None:  # noqa: N803 (boto3's name)
        self.stopped.append(TrainingJobName)


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Callable[..., tuple[Any, TrialWriter]]]:
    """``live(steps, ended=False)``: a trial (and its writer) saving ``loss`` at those steps."""
    opened: list[Any] = []

    def make(steps: range, *, ended: bool = False) -> tuple[Any, TrialWriter]:
        writer = TrialWriter(tmp_path / f"trial{len(opened)}")
        writer.write_collections([])
        for s in steps:
            write(writer, s)
        if ended:
            writer.end_training()
        trial = create_trial(str(writer.root))
        opened.append(trial)
        return trial, writer

    yield make
    for trial in opened:
        trial.close()


def write(writer: TrialWriter, step: int) -> None:
    writer.write_step(step, {"loss": np.float32(1.0)})


def rule_with(trial: Any, clock: FakeClock, **params: str) -> StalledTrainingRule:
    rule = StalledTrainingRule(trial, **params)
    rule.clock, rule.sleep = clock, clock.sleep
    return rule


def test_registered() -> None:
    """The registry finds StalledTrainingRule by name, any case."""
    assert registry.lookup("stalledtrainingrule") is StalledTrainingRule


def test_fires_at_the_newest_step_after_threshold_seconds(live: Callable[..., Any]) -> None:
    """With no new step, the rule waits at the newest step (2) and fires there once threshold
    seconds have passed; the older steps pass at once."""
    trial, _ = live(range(3))
    clock = FakeClock()
    result = invoke_rule(rule_with(trial, clock, threshold="60"), continue_after_fire=False)
    assert result.fired_steps == (2,)
    assert result.ended_by == Termination.CONDITION_MET
    assert clock.now == pytest.approx(160.0)
    assert clock.sleeps == 60  # one-second polls, all at step 2


def test_a_new_step_in_time_restarts_the_wait(live: Callable[..., Any]) -> None:
    """A step arriving 1 s into the wait at step 2 means progress; the rule then fires at the
    new step 3 when nothing follows it."""
    trial, writer = live(range(3))
    clock = FakeClock()

    def arrive(n: int) -> None:
        if n == 1:
            write(writer, 3)
            trial.refresh_data()

    clock.on_sleep = arrive
    result = invoke_rule(rule_with(trial, clock, threshold="30"), continue_after_fire=False)
    assert result.fired_steps == (3,)
    assert clock.now == pytest.approx(131.0)  # step 3 first seen at 101, then 30 s


def test_training_end_while_waiting_does_not_fire(live: Callable[..., Any]) -> None:
    """Training ending during the wait is not a stall: the run ends without firing."""
    trial, writer = live(range(3))
    clock = FakeClock()

    def end(n: int) -> None:
        if n == 5:
            writer.end_training()
            trial.refresh_data()

    clock.on_sleep = end
    result = invoke_rule(rule_with(trial, clock, threshold="60"))
    assert result.fired_steps == ()
    assert result.ended_by == Termination.END_OF_DATA
    assert clock.sleeps == 5


def test_an_ended_trial_never_waits(live: Callable[..., Any]) -> None:
    """On a finished job the rule never sleeps and never fires."""
    trial, _ = live(range(5), ended=True)
    clock = FakeClock()
    clock.on_sleep = lambda n: pytest.fail("the rule slept on an ended trial")
    assert invoke_rule(rule_with(trial, clock)).fired_steps == ()


def test_firing_reason_names_seconds_waited_and_threshold(live: Callable[..., Any]) -> None:
    """The firing reason gives the step, the seconds without a new step and threshold; each
    one-second poll before it was a comparison."""
    trial, _ = live(range(3))
    rule = rule_with(trial, FakeClock(), threshold="60")
    assert invoke_rule(rule, continue_after_fire=False).fired_steps == (2,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (2, [])
    assert (reason["quantity"], reason["value"]) == ("seconds without a new step", 60)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "threshold",
        60,
        ">=",
    )
    assert "no step after 2 for 60 s (>= threshold 60 s)" in reason["sentence"]
    assert rule.evidence.comparisons == 61


def test_an_ended_trial_checks_nothing(live: Callable[..., Any]) -> None:
    """On a finished job nothing was timed: no comparison, and the error says why."""
    trial, _ = live(range(5), ended=True)
    rule = rule_with(trial, FakeClock())
    assert invoke_rule(rule).fired_steps == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=5))
    assert "training had ended before it could wait" in text
    assert "times the gaps between saved steps while the training job runs" in text


def test_fires_in_real_time(live: Callable[..., Any]) -> None:
    """With the real clock and a 0.3 s threshold, the rule fires at the last step after about
    0.3 s."""
    trial, _ = live(range(2))
    rule = StalledTrainingRule(trial, threshold="0.3")
    rule.poll_seconds = 0.05
    began = time.monotonic()
    result = invoke_rule(rule, continue_after_fire=False)
    assert result.fired_steps == (1,)
    assert 0.3 <= time.monotonic() - began < 5


def test_stop_training_on_fire_stops_the_one_matching_job(live: Callable[..., Any]) -> None:
    """On firing, the only InProgress job starting with the prefix is stopped."""
    trial, _ = live(range(1))
    clock = FakeClock()
    sagemaker = StubSageMaker(["my-job-2024", "other-job"])
    rule = rule_with(
        trial, clock, threshold="5", stop_training_on_fire="True", training_job_name_prefix="my-job"
    )
    rule.client_factory = lambda service: sagemaker
    assert invoke_rule(rule, continue_after_fire=False).fired_steps == (0,)
    assert sagemaker.stopped == ["my-job-2024"]


def test_stop_training_on_fire_stops_nothing_when_several_jobs_match(
    live: Callable[..., Any],
) -> None:
    """Two matching jobs: the rule still fires, but stops no job (safe mode)."""
    trial, _ = live(range(1))
    sagemaker = StubSageMaker(["my-job-a", "my-job-b"])
    rule = rule_with(
        trial,
        FakeClock(),
        threshold="5",
        stop_training_on_fire="true",
        training_job_name_prefix="my-job",
    )
    rule.client_factory = lambda service: sagemaker
    assert invoke_rule(rule, continue_after_fire=False).fired_steps == (0,)
    assert sagemaker.listed == 1
    assert sagemaker.stopped == []


def test_no_aws_call_unless_it_fires(live: Callable[..., Any]) -> None:
    """A rule with stop_training_on_fire that never fires never lists training jobs."""
    trial, _ = live(range(3), ended=True)
    sagemaker = StubSageMaker(["my-job"])
    rule = rule_with(
        trial, FakeClock(), stop_training_on_fire="True", training_job_name_prefix="my-job"
    )
    rule.client_factory = lambda service: sagemaker
    assert invoke_rule(rule).fired_steps == ()
    assert sagemaker.listed == 0


def test_stop_training_on_fire_needs_a_prefix(live: Callable[..., Any]) -> None:
    """stop_training_on_fire without training_job_name_prefix is a configuration error."""
    trial, _ = live(range(1))
    with pytest.raises(ConfigurationError, match="training_job_name_prefix"):
        StalledTrainingRule(trial, stop_training_on_fire="True")


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("threshold", "soon"),
        ("threshold", "0"),
        ("threshold", "-5"),
        ("stop_training_on_fire", "perhaps"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    live: Callable[..., Any], parameter: str, value: str
) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial, _ = live(range(1))
    with pytest.raises(
        ConfigurationError, match=rf"StalledTrainingRule parameter {parameter} .*'{value}'"
    ):
        StalledTrainingRule(trial, **{parameter: value})


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in StalledTrainingRule.PARAMETERS}
    assert declared == {
        "threshold": "1800",
        "stop_training_on_fire": "False",
        "training_job_name_prefix": None,
    }
