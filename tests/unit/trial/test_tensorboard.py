"""TensorBoard logs through the one Trial API: values equal EventAccumulator's for every tag."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from evaluator.errors import ClientError, HistogramValueUnavailable, TensorUnavailableForStep
from evaluator.modes import ModeKeys
from evaluator.trial import create_trial
from tests.support.tb_logs import oracle, oracle_values, tf2_style, torch_style

pytest.importorskip("tensorboard")
pytest.importorskip("tensorboardX")

RNG = np.random.default_rng(7)
STEPS = range(0, 12, 2)


def _torch_log(folder: Path) -> Path:
    return torch_style(
        folder,
        scalars={
            "loss": [(s, 1.0 / (s + 1)) for s in STEPS],
            "accuracy": [(s, s / 20) for s in STEPS],
        },
        histograms={
            "fc1.weight": [(s, RNG.normal(0, 0.1, 300)) for s in STEPS],
            "fc1.weight.grad": [(s, RNG.normal(0, 1e-3, 300)) for s in STEPS],
            "fc1.bias": [(s, np.zeros(10)) for s in STEPS],
        },
    )


def _exact_reductions(h: object) -> dict[str, float]:
    """What a HistogramValue says exactly: min, max, mean, variance, l2."""
    n = h.num  # type: ignore[attr-defined]
    mean = h.sum / n  # type: ignore[attr-defined]
    return {
        "min": h.min,  # type: ignore[attr-defined]
        "max": h.max,  # type: ignore[attr-defined]
        "mean": mean,
        "variance": max(h.sum_squares / n - mean * mean, 0.0),  # type: ignore[attr-defined]
        "l2": float(np.sqrt(h.sum_squares)),  # type: ignore[attr-defined]
        "sum": h.sum,  # type: ignore[attr-defined]
    }


def test_torch_style_log_equals_event_accumulator(tmp_path: Path) -> None:
    """Every scalar and histogram of a tensorboardX log reads as EventAccumulator shows it."""
    log = _torch_log(tmp_path / "run")
    expected = oracle_values(log)
    with create_trial(str(log)) as trial:
        assert trial.kind == "tensorboard"
        assert set(trial.tensor_names()) == set(expected)
        assert trial.steps() == list(STEPS)
        for tag, by_step in expected.items():
            tensor = trial.tensor(tag)
            assert tensor.steps() == sorted(by_step)
            for step, want in by_step.items():
                if isinstance(want, float):
                    got = tensor.value(step)
                    assert got.shape == () and got.dtype == np.float32  # simple_value is float32
                    assert float(got) == want
                    continue
                for name, value in _exact_reductions(want).items():
                    assert tensor.reduction_value(step, name) == pytest.approx(value, rel=1e-12)
                assert tensor.reduction_value(step, "mean").dtype == np.float64
                h = tensor.histogram(step)
                assert h.count == want.num
                assert list(h.buckets[:, 2]) == list(want.bucket)
                assert list(h.buckets[1:, 0]) == list(want.bucket_limit[:-1])


def test_histogram_value_says_what_to_call(tmp_path: Path) -> None:
    """value() of a histogram raises a TensorUnavailableForStep naming reduction_value and
    histogram(), so rules written for reductions-only tensors take the reductions."""
    log = _torch_log(tmp_path / "run")
    with create_trial(str(log)) as trial:
        with pytest.raises(HistogramValueUnavailable) as caught:
            trial.tensor("fc1.weight").value(0)
        assert isinstance(caught.value, TensorUnavailableForStep)
        assert caught.value.has_reductions
        assert "reduction_value" in str(caught.value) and "histogram(" in str(caught.value)
        saved = trial.tensor("fc1.weight").reduction_values(0)
        assert ("mean", False) in saved and ("histogram", False) not in saved
        with pytest.raises(TensorUnavailableForStep):
            trial.tensor("loss").histogram(0)


def test_bucket_reductions_within_the_stated_bound(tmp_path: Path) -> None:
    """The mean of absolute values, from buckets, is within the histogram's error bound."""
    data = {s: RNG.normal(0.2, 1.0, 500) for s in STEPS}
    log = torch_style(tmp_path / "run", histograms={"w": list(data.items())})
    with create_trial(str(log)) as trial:
        for step, values in data.items():
            bound = trial.tensor("w").histogram(step).error_bound
            got = trial.tensor("w").reduction_value(step, "mean", abs=True)
            assert abs(got - np.mean(np.abs(values))) <= bound
            assert trial.tensor("w").reduction_value(step, "max", abs=True) == pytest.approx(
                np.max(np.abs(values))
            )


def test_tf2_style_log_equals_event_accumulator(tmp_path: Path) -> None:
    """TF2 tensor summaries (scalars, [k,3] histograms, other tensors; metadata on the first
    value only) read as EventAccumulator's Tensors() shows them."""
    hist = {s: RNG.normal(0, 1, 200) for s in STEPS}
    log = tf2_style(
        tmp_path / "run",
        scalars={"epoch_loss": [(s, 2.0 - s / 10) for s in STEPS]},
        histograms={"dense/kernel_0/histogram": list(hist.items())},
        tensors={"confusion": [(s, np.arange(4.0).reshape(2, 2) + s) for s in STEPS]},
    )
    expected = oracle_values(log)
    with create_trial(str(log)) as trial:
        assert set(trial.tensor_names()) == set(expected)
        for step in STEPS:
            want = expected["epoch_loss"][step]
            got = trial.tensor("epoch_loss").value(step)
            assert got.dtype == want.dtype and float(got) == float(want)
            np.testing.assert_array_equal(
                trial.tensor("confusion").value(step), expected["confusion"][step]
            )
            buckets = expected["dense/kernel_0/histogram"][step]
            h = trial.tensor("dense/kernel_0/histogram").histogram(step)
            np.testing.assert_array_equal(h.buckets, buckets)
            tensor = trial.tensor("dense/kernel_0/histogram")
            assert tensor.reduction_value(step, "min") == pytest.approx(hist[step].min())
            assert tensor.reduction_value(step, "max") == pytest.approx(hist[step].max())
            assert h.count == len(hist[step]) and h.sum is None
            assert abs(tensor.reduction_value(step, "mean") - hist[step].mean()) <= h.error_bound


def test_phase_folders_map_to_modes(tmp_path: Path) -> None:
    """train/ and validation/ (Keras) become TRAIN and EVAL; mode steps are the event steps,
    global steps 2*step and 2*step+1."""
    tf2_style(tmp_path / "train", scalars={"epoch_loss": [(e, 1.0 - e / 10) for e in range(4)]})
    tf2_style(tmp_path / "validation", scalars={"epoch_loss": [(e, 1.1) for e in range(4)]})
    with create_trial(str(tmp_path)) as trial:
        assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3]
        assert trial.steps(mode=ModeKeys.EVAL) == [0, 1, 2, 3]
        assert trial.steps() == list(range(8))
        assert trial.mode_modestep(5) == (ModeKeys.EVAL, 2)
        loss = trial.tensor("epoch_loss")
        assert float(loss.value(2, mode=ModeKeys.TRAIN)) == pytest.approx(0.8)
        assert float(loss.value(2, mode=ModeKeys.EVAL)) == pytest.approx(1.1)
        mapping = trial.tensorboard_mapping
        assert mapping.folders == {"train": "TRAIN", "validation": "EVAL"} and mapping.phases


def test_add_scalars_folders_and_collections(tmp_path: Path) -> None:
    """torch's add_scalars folders (loss_train/, loss_val/) are phases of the run; tags fall
    into collections by their tensor names."""
    torch_style(
        tmp_path,
        scalars={"grad_2.0_norm/fc1.weight": [(0, 0.5)], "train_acc": [(0, 0.4)]},
        histograms={"fc1.weight": [(0, RNG.normal(size=20))], "fc1.bias.grad": [(0, [0.0])]},
    )
    torch_style(tmp_path / "loss_train", scalars={"loss": [(0, 1.0), (1, 0.9)]})
    torch_style(tmp_path / "loss_val", scalars={"loss": [(0, 1.2), (1, 1.1)]})
    with create_trial(str(tmp_path)) as trial:
        assert trial.tensorboard_mapping.folders == {
            "": "TRAIN",
            "loss_train": "TRAIN",
            "loss_val": "EVAL",
        }
        assert float(trial.tensor("loss").value(1, mode=ModeKeys.EVAL)) == pytest.approx(1.1)
        assert trial.tensor_names(collection="losses") == ["loss"]
        assert trial.tensor_names(collection="gradients") == [
            "fc1.bias.grad",
            "grad_2.0_norm/fc1.weight",
        ]
        assert trial.tensor_names(collection="weights") == ["fc1.weight"]
        assert trial.tensor_names(collection="biases") == []
        assert trial.tensor_names(collection="metrics") == ["acc"]  # train_acc: TRAIN acc
        assert trial.tensor_names(collection="histograms") == ["fc1.bias.grad", "fc1.weight"]


def test_collections_can_be_overridden(tmp_path: Path) -> None:
    """A collection given in tensorboard_collections replaces the default of that name."""
    torch_style(tmp_path, scalars={"objective": [(0, 1.0)], "loss": [(0, 2.0)]})
    with create_trial(str(tmp_path), tensorboard_collections={"losses": ["^objective$"]}) as t:
        assert t.tensor_names(collection="losses") == ["objective"]


def test_several_runs_need_a_choice(tmp_path: Path) -> None:
    """A folder of several runs names them; tensorboard_run (or the run's folder) picks one."""
    torch_style(tmp_path / "version_0", scalars={"loss": [(0, 1.0)]})
    torch_style(tmp_path / "version_1", scalars={"loss": [(0, 2.0)]})
    with pytest.raises(ClientError, match="version_0, version_1"):
        create_trial(str(tmp_path))
    with create_trial(str(tmp_path), tensorboard_run="version_1") as trial:
        assert float(trial.tensor("loss").value(0)) == 2.0
    with create_trial(str(tmp_path / "version_0")) as trial:
        assert float(trial.tensor("loss").value(0)) == 1.0


def test_restarted_run_keeps_the_later_values(tmp_path: Path) -> None:
    """A second file of the same folder (a restart) overrides the steps it logs again, like
    the last point TensorBoard draws at that step; the other steps stay."""
    torch_style(tmp_path / "a", scalars={"loss": [(s, 1.0) for s in range(6)]})
    torch_style(tmp_path / "b", scalars={"loss": [(s, 2.0) for s in range(3, 8)]})
    first = next((tmp_path / "a").iterdir())
    second = next((tmp_path / "b").iterdir())
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(first, run / "events.out.tfevents.1000.host.1.0")
    shutil.copy(second, run / "events.out.tfevents.2000.host.2.0")
    expected = {}
    for event in oracle(run).Scalars("loss"):
        expected[event.step] = event.value  # the later of a repeated step
    with create_trial(str(run)) as trial:
        loss = trial.tensor("loss")
        assert {s: float(loss.value(s)) for s in loss.steps()} == expected
        assert expected == {0: 1.0, 1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0, 5: 2.0, 6: 2.0, 7: 2.0}


def test_session_start_purges_orphaned_steps(tmp_path: Path) -> None:
    """SessionLog.START at step s drops what the folder logged at steps >= s before it, as
    EventAccumulator's purge_orphaned_data does."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))

    def scalar(tag: str, step: int, x: float) -> event_pb2.Event:
        value = summary_pb2.Summary.Value(tag=tag, simple_value=x)
        return event_pb2.Event(step=step, wall_time=1.0, summary=summary_pb2.Summary(value=[value]))

    for s in range(6):
        writer.add_event(scalar("loss", s, 1.0))
        writer.add_event(scalar("lr", s, 0.1))
    start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
    writer.add_event(event_pb2.Event(step=3, wall_time=2.0, session_log=start))
    for s in range(3, 5):
        writer.add_event(scalar("loss", s, 2.0))
    writer.close()
    acc = oracle(tmp_path)
    with create_trial(str(tmp_path)) as trial:
        for tag in ("loss", "lr"):
            want = {e.step: e.value for e in acc.Scalars(tag)}
            t = trial.tensor(tag)
            assert {s: float(t.value(s)) for s in t.steps()} == pytest.approx(want)
        assert trial.tensor("lr").steps() == [0, 1, 2]


def test_smdebug_trial_is_still_smdebug(tmp_path: Path) -> None:
    """A trial smdebug wrote is read as before (kind smdebug, no mapping)."""
    from evaluator.formats import Collection
    from evaluator.testing import TrialWriter

    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("losses", tensor_names={"loss"})])
    writer.write_step(0, {"loss": np.float32(1.0)})
    with create_trial(str(tmp_path)) as trial:
        assert trial.kind == "smdebug" and trial.tensorboard_mapping is None
        assert trial.tensor("loss").value(0).item() == 1.0


def test_summary_shows_kind_mapping_and_collections(tmp_path: Path) -> None:
    """summary says a TensorBoard log was found, how it was mapped, and its collections."""
    from evaluator.summary import format_summary, summarize

    torch_style(tmp_path / "train", scalars={"loss": [(0, 1.0), (1, 0.5)]})
    torch_style(tmp_path / "val", scalars={"loss": [(0, 1.1)]})
    with create_trial(str(tmp_path)) as trial:
        summary = summarize(trial)
    text = format_summary(summary)
    assert summary.kind == "tensorboard"
    assert "TensorBoard log" in text
    assert "train -> TRAIN, val -> EVAL" in text and "2 x event step" in text
    assert "losses (1)" in text and summary.steps_per_mode == {"TRAIN": 2, "EVAL": 1}


def test_s3_log_reads_as_the_local_one(
    tmp_path: Path, s3_bucket: str, upload_folder: object
) -> None:
    """The same log on S3 (moto) gives the same tensors and values as the local folder."""
    log = _torch_log(tmp_path / "run")
    uri = upload_folder(log, "jobs/exp1")  # type: ignore[operator]
    with create_trial(str(log)) as local, create_trial(uri) as remote:
        assert remote.kind == "tensorboard"
        assert remote.tensor_names() == local.tensor_names()
        for name in local.tensor_names():
            for step in local.tensor(name).steps():
                assert remote.tensor(name).reduction_value(step, "max") == local.tensor(
                    name
                ).reduction_value(step, "max")


def test_long_file_handed_on_in_parts_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file read in parts (a few records framed and decoded at a time) gives every value
    EventAccumulator shows, each step once."""
    import evaluator.sources.tensorboard.source as tb_source

    monkeypatch.setattr(tb_source, "_CHUNK_RECORDS", 7)
    log = _torch_log(tmp_path / "run")
    expected = oracle_values(log)
    with create_trial(str(log)) as trial:
        assert trial.steps() == list(STEPS)
        for tag, by_step in expected.items():
            tensor = trial.tensor(tag)
            assert tensor.steps() == sorted(by_step)
            for step, want in by_step.items():
                got = tensor.value(step) if isinstance(want, float) else None
                if got is not None:
                    assert float(got) == want
                else:
                    assert tensor.reduction_value(step, "max") == want.max
