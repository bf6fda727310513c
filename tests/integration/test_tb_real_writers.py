"""Every built-in rule with DEFAULT parameters on TensorBoard runs written by the real writers
(PyTorch's SummaryWriter, Keras 3's TensorBoard callback, tf.summary, Lightning's and Hugging
Face's tag idioms; tests/fixtures/tb_logs): the labelled faults fire with evidence, nothing
else fires, and rules that need what a log lacks end "Insufficient information" naming it and
the line of logging code that adds it; every value equals TensorBoard's EventAccumulator."""

from __future__ import annotations

import numpy as np
import pytest

from evaluator.formats.tensorboard.summary import phase_of_tag
from evaluator.modes import ModeKeys
from evaluator.rules.coverage import TENSORBOARD_NEEDS
from evaluator.trial import create_trial
from tests.support.tb_logs import oracle_values
from tests.support.tb_real_logs import (
    ROOT,
    RUNS,
    Verdict,
    labels,
    run_rules,
    tag_sources,
    tensor_of,
)

pytest.importorskip("tensorboard")


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Verdict]]:
    root = tmp_path_factory.mktemp("tb-real")
    return {run: run_rules(run, root / run) for run in RUNS}


def test_the_suite_covers_every_writer_and_fault() -> None:
    """Runs of torch, Keras, tf.summary, Lightning and Hugging Face idioms, healthy and faulty."""
    prefixes = {r.split("_")[0] for r in RUNS}
    assert {"torch", "keras", "tf", "lightning", "hf"} <= prefixes
    expected = {rule for r in RUNS for rule in labels(r)["expected"]}
    assert {"VanishingGradient", "ExplodingTensor", "LossNotDecreasing", "Overfit"} <= expected
    assert any(not labels(r)["expected"] for r in RUNS)


@pytest.mark.parametrize("run", RUNS)
def test_labelled_faults_fire_with_evidence(
    verdicts: dict[str, dict[str, Verdict]], run: str
) -> None:
    """Each rule the run's labels expect fires, with the firing in its evidence."""
    for rule in labels(run)["expected"]:
        v = verdicts[run][rule]
        assert v.status == "fired", f"{rule} on {run}: {v.cell} {v.message}"
        assert v.evidence > 0, f"{rule} on {run} fired without evidence"


@pytest.mark.parametrize("run", RUNS)
def test_no_false_alarm(verdicts: dict[str, dict[str, Verdict]], run: str) -> None:
    """No rule fires that the labels neither expect nor allow (``also``: rules the fault sets
    off by their own definitions, such as LossNotDecreasing on a NaN loss); those labelled
    quiet decided there was no issue."""
    want = labels(run)
    fired = {r: v.cell for r, v in verdicts[run].items() if v.status == "fired"}
    allowed = set(want["expected"]) | set(want["also"])
    assert set(fired) <= allowed, f"false alarms on {run}: {fired}"
    for rule in want["quiet"]:
        v = verdicts[run][rule]
        assert v.status == "quiet", f"{rule} on {run}: {v.cell} {v.message}"


@pytest.mark.parametrize("run", RUNS)
def test_missing_data_is_named_with_the_line_that_logs_it(
    verdicts: dict[str, dict[str, Verdict]], run: str
) -> None:
    """A rule that needs what the log lacks ends "Insufficient information", never a vacuous
    NoIssuesFound, naming what is missing and the logging code that adds it."""
    for rule in labels(run)["insufficient"]:
        v = verdicts[run][rule]
        assert v.status == "insufficient", f"{rule} on {run}: {v.cell}"
        what, line = TENSORBOARD_NEEDS[rule]
        assert "Insufficient information" in v.message
        assert what in v.message and line in v.message, v.message


def _check_value(tensor: object, step: int, mode: ModeKeys, want: object) -> None:
    if isinstance(want, float):  # a simple_value scalar
        got = tensor.value(step, mode=mode)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(got, np.float32(want))
    elif hasattr(want, "bucket_limit"):  # a HistogramProto
        h = tensor.histogram(step, mode=mode)  # type: ignore[attr-defined]
        assert (h.min, h.max, h.count) == (want.min, want.max, want.num)  # type: ignore[attr-defined]
        assert (h.sum, h.sum_squares) == (want.sum, want.sum_squares)  # type: ignore[attr-defined]
        assert list(h.buckets[:, 2]) == list(want.bucket)  # type: ignore[attr-defined]
    elif np.ndim(want) == 2 and np.shape(want)[1] == 3:  # a TF2 histogram
        h = tensor.histogram(step, mode=mode)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(h.buckets, np.asarray(want, np.float64))
    else:  # a TF2 scalar or other tensor
        got = tensor.value(step, mode=mode)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(got, want)


def _not_numeric(by_step: dict[int, object]) -> bool:
    return any(isinstance(v, np.ndarray) and v.dtype.kind in "OSU" for v in by_step.values())


@pytest.mark.parametrize("run", RUNS)
def test_values_equal_event_accumulator(run: str) -> None:
    """Every value of every tag equals what EventAccumulator (size_guidance 0) shows, read as
    the tensor and mode docs/tensorboard.md maps the tag to."""
    sources = [(folder, phase, oracle_values(folder)) for folder, phase in tag_sources(run)]
    phase_words = any(phase_of_tag(t) for _, _, tags in sources for t in tags)
    phased = phase_words or any(p is not None for _, p, _ in sources)
    own = ModeKeys.TRAIN if phased else ModeKeys.GLOBAL
    checked = 0
    with create_trial(str(ROOT / run)) as trial:
        for _, phase, expected in sources:
            for tag, by_step in expected.items():
                if not by_step or _not_numeric(by_step):
                    continue  # text (Hugging Face's args), images: skipped by the reader
                name, mode = tensor_of(tag, phase, phase_words)
                mode = mode or own
                tensor = trial.tensor(name)
                assert set(by_step) <= set(tensor.steps(mode=mode)), (tag, name, mode)
                for step, want in by_step.items():
                    _check_value(tensor, step, mode, want)
                    checked += 1
    assert checked > 0
