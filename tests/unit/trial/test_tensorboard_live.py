"""Live TensorBoard logs: a growing file is tailed, a torn last record is read again later,
new files are picked up, each poll reads each grown file once from its last offset."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.modes import ModeKeys
from evaluator.storage import MemoryStorage
from evaluator.trial import create_trial
from tests.support.tb_logs import oracle_values, torch_style

pytest.importorskip("tensorboardX")


def _log_bytes(tmp_path: Path, steps: int) -> bytes:
    folder = torch_style(tmp_path / "w", scalars={"loss": [(s, 10.0 - s) for s in range(steps)]})
    (file,) = folder.iterdir()
    return file.read_bytes()


KEY = "events.out.tfevents.1700000000.host.1.0"


def test_torn_last_record_is_read_again_later(tmp_path: Path) -> None:
    """A file cut inside its last record gives the steps before it; once the record is whole
    the step appears, with its value: never an error, never a skipped step."""
    data = _log_bytes(tmp_path, 6)
    storage = MemoryStorage({KEY: data[:-7]}, uri="memory://live")
    with create_trial("memory://live", storage=storage, trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 2, 3, 4]
        storage.put(KEY, data)
        trial.refresh_data()
        assert trial.steps() == [0, 1, 2, 3, 4, 5]
        assert float(trial.tensor("loss").value(5)) == 5.0
        assert trial.data_problem_count == 0


def _record_size(tmp_path: Path) -> int:
    """The size of the record of one scalar at a step from 1 to 127 (step 0 has no field)."""
    return len(_log_bytes(tmp_path / "two", 2)) - len(_log_bytes(tmp_path / "one", 1))


@pytest.mark.parametrize("cut", [3, 20, -2])
def test_record_torn_anywhere_is_read_again_later(tmp_path: Path, cut: int) -> None:
    """A last record cut in its header, payload or footer is read again once whole."""
    data = _log_bytes(tmp_path, 4)
    last = _record_size(tmp_path)
    at = len(data) - last + cut if cut > 0 else len(data) + cut  # header, payload, footer
    storage = MemoryStorage({KEY: data[:at]}, uri="memory://live")
    with create_trial("memory://live", storage=storage, trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 2]
        storage.put(KEY, data)
        trial.refresh_data()
        assert trial.steps() == [0, 1, 2, 3]
        assert float(trial.tensor("loss").value(3)) == 7.0


def test_corrupt_record_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    """A record whose payload CRC is wrong, followed by valid records, was written whole: it
    is skipped and reading resumes at the next valid record (before: the file's reading
    ended there, as TensorBoard's does). Never a quiet end: it is a data problem."""
    data = bytearray(_log_bytes(tmp_path, 5))
    last = _record_size(tmp_path)
    offset = len(data) - 3 * last
    data[offset + 14] ^= 0xFF  # inside the payload of step 2's record
    storage = MemoryStorage({KEY: bytes(data)}, uri="memory://live")
    with create_trial("memory://live", storage=storage, trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 3, 4]
        assert float(trial.tensor("loss").value(3)) == 7.0
        # the trial's data problems (the result file's) name the file and the offset
        assert trial.data_problem_count == 1
        (problem,) = trial.data_problems
        assert problem["problem"] == "corrupt" and problem["file"].endswith(KEY)
        assert problem["step"] == 1 and problem["offset"] == offset


def test_each_poll_reads_each_grown_file_once_from_its_offset(tmp_path: Path) -> None:
    """A poll lists once and reads only the files that grew, one ranged read each, starting
    where the last read ended; a new file of the run is picked up."""
    data = _log_bytes(tmp_path, 8)
    half = len(data) // 2
    storage = MemoryStorage({KEY: data[:half]}, uri="memory://live")
    with create_trial("memory://live", storage=storage, trial_format="tensorboard") as trial:
        seen = trial.steps()
        storage.calls.clear()
        trial.refresh_data()  # nothing grew: no read
        assert storage.calls["read_range"] == 0
        storage.put(KEY, data)
        storage.put(KEY.replace(".1.0", ".2.0"), _log_bytes(tmp_path / "b", 10)[:])
        storage.calls.clear()
        trial.refresh_data()
        assert storage.calls["read_range"] == 2 and storage.calls["read"] == 0
        assert trial.steps() == list(range(10)) and len(seen) < 8


def test_writer_in_another_process_is_followed_to_the_end(tmp_path: Path) -> None:
    """While a tensorboardX writer in another process appends (and restarts with a second
    file), the trial follows it step by step; idle scans end it; every value equals
    EventAccumulator's."""
    log = tmp_path / "run"
    log.mkdir()
    script = textwrap.dedent(
        f"""
        import time
        from tensorboardX import SummaryWriter
        w = SummaryWriter({str(log)!r}, flush_secs=1)
        for s in range(40):
            w.add_scalar("loss", 1.0 / (s + 1), s)
            w.flush()
            time.sleep(0.02)
            if s == 20:
                w.close()
                time.sleep(1.1)  # the next file's name has a later time
                w = SummaryWriter({str(log)!r}, flush_secs=1)
        w.close()
        """
    )
    torch_style(log, scalars={"loss": [(0, 1.0)]})  # the first file exists before the trial
    writer = subprocess.Popen([sys.executable, "-c", script])
    try:
        with create_trial(str(log), idle_scans_to_complete=4, poll_interval=0.3) as trial:
            visited = []
            step = trial.next_step(None)
            while step is not None:
                visited.append(step)
                step = trial.next_step(step)
            assert writer.wait(timeout=60) == 0
            want = oracle_values(log)["loss"]
            assert visited == sorted(want) == list(range(40))
            loss = trial.tensor("loss")
            assert {s: float(loss.value(s)) for s in loss.steps()} == want
    finally:
        writer.kill()


def test_growing_log_on_s3_is_followed(tmp_path: Path, s3_server: object, s3_bucket: str) -> None:
    """On S3 (moto), a log uploaded again with more records gives the new steps at the next
    poll, read from where the last read ended."""
    data = _log_bytes(tmp_path, 8)
    put = s3_server.put_objects  # type: ignore[attr-defined]
    put(s3_bucket, {KEY: data[: len(data) // 2]}, prefix="job/tb/")
    with create_trial(f"s3://{s3_bucket}/job/tb") as trial:
        first = trial.steps()
        assert trial.kind == "tensorboard" and 0 < len(first) < 8
        put(s3_bucket, {KEY: data}, prefix="job/tb/")
        trial.refresh_data()
        assert trial.steps() == list(range(8))
        assert float(trial.tensor("loss").value(7)) == 3.0


def test_validation_folder_created_later_is_read_as_eval(tmp_path: Path) -> None:
    """Keras creates validation/ at the first validation: a phase folder that appears after
    the trial was opened is read, as EVAL."""
    torch_style(tmp_path / "train", scalars={"epoch_loss": [(0, 1.0)]})
    with create_trial(str(tmp_path)) as trial:
        assert trial.steps() == [0]
        torch_style(tmp_path / "validation", scalars={"epoch_loss": [(0, 1.5)]})
        trial.refresh_data()
        assert float(trial.tensor("epoch_loss").value(0, mode=ModeKeys.EVAL)) == 1.5
        assert trial.tensorboard_mapping.folders["validation"] == "EVAL"
