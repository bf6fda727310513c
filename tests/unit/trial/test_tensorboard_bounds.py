"""Hostile TensorBoard logs (issue 40): a record whose length field points past the file's
end, a sparse file listed far larger than it is, steps too large to double; each is a data
problem of the trial (the result file's ``data_problems``: the file and the offset), read
within bounded memory, never a quiet end."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest

from evaluator.formats.crc import masked_crc32c
from evaluator.formats.keys import END_OF_JOB_KEY
from evaluator.formats.proto import event_pb2, summary_pb2
from evaluator.formats.tensorboard.summary import MAX_HISTOGRAM_BUCKETS
from evaluator.formats.tfrecord import encode_record, iter_records
from evaluator.storage import MemoryStorage
from evaluator.storage.local import LocalStorage
from evaluator.testing.tb_writer import write_scalars
from evaluator.trial import create_trial
from tests.support.tb_logs import torch_style

pytest.importorskip("tensorboardX")

KEY = "events.out.tfevents.1700000000.host.1.0"


def _log_bytes(tmp_path: Path, steps: int) -> bytes:
    folder = torch_style(tmp_path / "w", scalars={"loss": [(s, 10.0 - s) for s in range(steps)]})
    (file,) = folder.iterdir()
    return file.read_bytes()


def _with_length(data: bytes, record: int, length: int) -> tuple[bytes, int]:
    """``data`` with the length field of its ``record``-th record set to ``length`` (and
    that field's CRC made right, so only the length is wrong); and that record's offset."""
    offset = list(iter_records(data, source="t"))[record].offset
    field = struct.pack("<Q", length)
    header = field + struct.pack("<I", masked_crc32c(field))
    return data[:offset] + header + data[offset + 12 :], offset


def test_a_length_past_the_files_end_is_a_data_problem_and_reading_goes_on(
    tmp_path: Path,
) -> None:
    """Step 5's record of 30 claims 2**33 bytes (its length CRC right): the steps after it
    are read (the reader finds the next valid record), and the file and the offset are a
    data problem of the trial. Before: steps 0-4 and no data problem at all."""
    data, offset = _with_length(_log_bytes(tmp_path, 30), 6, 1 << 33)  # record 0: file version
    storage = MemoryStorage({KEY: data}, uri="memory://hostile")
    with create_trial("memory://hostile", storage=storage, trial_format="tensorboard") as trial:
        assert trial.steps() == [s for s in range(30) if s != 5]
        assert float(trial.tensor("loss").value(29)) == -19.0
        (problem,) = trial.data_problems
        assert problem["problem"] == "corrupt" and problem["file"].endswith(KEY)
        assert problem["offset"] == offset and str(1 << 33) in problem["detail"]
        assert problem["step"] == 4


def test_a_last_record_past_the_end_of_a_finished_log_is_a_data_problem(tmp_path: Path) -> None:
    """A finished log (nothing written to it for a minute) whose last record claims more
    bytes than the file has lost that record: a ``truncated`` data problem naming the file
    and the offset, not a quiet end."""
    data, offset = _with_length(_log_bytes(tmp_path, 6), 6, 1 << 33)
    log = tmp_path / "log"
    log.mkdir()
    path = log / KEY
    path.write_bytes(data)
    old = time.time() - 3600
    os.utime(path, (old, old))
    with create_trial(str(log), trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 2, 3, 4]
        (problem,) = trial.data_problems
        assert problem["problem"] == "truncated" and problem["offset"] == offset


def test_a_sparse_file_listed_as_40_gib_is_read_a_part_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few KB of records, then a 40 GiB hole, in a finished log: no read asks for more
    than 64 MiB (before: one read of the whole 40 GiB), the records are read, the zeros are a
    corrupt record (no valid record follows in the bytes looked through)."""
    data = _log_bytes(tmp_path, 10)
    log = tmp_path / "log"
    log.mkdir()
    path = log / KEY
    path.write_bytes(data)
    os.truncate(path, 40 << 30)
    old = time.time() - 3600
    os.utime(path, (old, old))
    spans: list[int] = []
    read_range = LocalStorage.read_range

    async def bounded(self: LocalStorage, key: str, start: int, end: int) -> bytes:
        spans.append(end - start)
        assert end - start <= 64 << 20, f"asked for {end - start} bytes at once"
        return await read_range(self, key, start, end)

    monkeypatch.setattr(LocalStorage, "read_range", bounded)
    with create_trial(str(log), trial_format="tensorboard") as trial:
        assert trial.steps() == list(range(10))
        (problem,) = trial.data_problems
        assert problem["problem"] == "corrupt" and problem["offset"] == len(data)
    assert spans and max(spans) <= 64 << 20


def test_steps_too_large_to_double_are_left_out_and_told(tmp_path: Path) -> None:
    """Phase folders make the global step 2 * step (+1): a step of 2**62 or more would not fit
    in 64 bits (before: the rule visited steps from -2**63 first). Such records are left out
    and the file is a ``step_too_large`` data problem; the other steps are read as ever."""
    huge = [1 << 62, (1 << 63) - 1]
    torch_style(tmp_path / "log" / "train", scalars={"loss": [(s, 1.0) for s in [0, 1, *huge]]})
    torch_style(tmp_path / "log" / "validation", scalars={"loss": [(0, 2.0), (1, 3.0)]})
    with create_trial(str(tmp_path / "log"), trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 2, 3]
        assert all(s >= 0 for s in trial.tensor("loss").steps())
        (problem,) = trial.data_problems
        assert problem["problem"] == "step_too_large" and "/train/" in problem["file"]
        assert str(1 << 62) in problem["detail"]


def _histogram_record(step: int, buckets: int) -> bytes:
    histo = summary_pb2.HistogramProto(
        min=0.0, max=1.0, num=buckets, bucket_limit=range(buckets), bucket=[1.0] * buckets
    )
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="w", histo=histo)])
    event = event_pb2.Event(wall_time=1.0, step=step, summary=summary)
    return encode_record(event.SerializeToString(), payload_crc=True)


def test_a_histogram_over_the_bucket_limit_is_refused_before_it_is_built(tmp_path: Path) -> None:
    """A HistogramProto claiming more buckets than MAX_HISTOGRAM_BUCKETS is skipped before
    any array or list is made of its buckets (before: 10**7 buckets took 1.86 GB), as an
    ``unreadable`` data problem naming the file and the record's offset; histograms within
    the limit and the scalars are read."""
    path = write_scalars(tmp_path / "log", {"loss": [(s, 1.0) for s in range(3)]})
    ok, hostile = _histogram_record(0, 30), _histogram_record(1, MAX_HISTOGRAM_BUCKETS + 1)
    offset = path.stat().st_size + len(ok)
    with open(path, "ab") as f:
        f.write(ok + hostile)
    with create_trial(str(tmp_path / "log"), trial_format="tensorboard") as trial:
        assert trial.tensor("loss").steps() == [0, 1, 2]
        assert trial.tensor("w").steps() == [0]
        (problem,) = trial.data_problems
        assert problem["problem"] == "unreadable" and problem["offset"] == offset
        assert f"over the limit of {MAX_HISTOGRAM_BUCKETS}" in problem["detail"]


def test_a_file_shorter_than_its_listing_is_not_asked_again_and_again(tmp_path: Path) -> None:
    """A listing that says more bytes than a read gives (the file was cut meanwhile, or the
    listing is stale) ends that file's reading for this scan: no loop of reads."""

    class Stale(MemoryStorage):
        async def read_range(self, key: str, start: int, end: int) -> bytes:
            return (await super().read_range(key, start, end))[:100]

    data = _log_bytes(tmp_path, 10)
    storage = Stale({KEY: data}, uri="memory://stale")
    with create_trial("memory://stale", storage=storage, trial_format="tensorboard") as trial:
        assert len(trial.steps()) < 10
        assert storage.calls["read_range"] <= 3


def _finished_log(tmp_path: Path, data: bytes) -> Path:
    """A local log holding ``data`` that nothing wrote to for an hour: a finished run."""
    log = tmp_path / "log"
    log.mkdir()
    path = log / KEY
    path.write_bytes(data)
    old = time.time() - 3600
    os.utime(path, (old, old))
    return log


@pytest.mark.parametrize("part", [None, 300])
@pytest.mark.parametrize(("field", "where"), [("data", 14), ("length", 9)])
def test_a_bad_crc_in_a_finished_file_is_skipped_and_reading_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, where: int, part: int | None
) -> None:
    """Step 5's record of 30 in a finished log has a wrong payload CRC (a payload byte
    flipped) or a wrong length CRC: the reader finds the next valid record, the other 29
    steps are read, and the skipped bytes are a ``corrupt`` data problem naming the file and
    the offset. Before: steps 0-4 only, the rest of the file never read. Read in parts of
    300 bytes, the first part ends inside the next record: it is looked for in the next."""
    if part is not None:
        monkeypatch.setattr("evaluator.sources.tensorboard.source._READ_BYTES", part)
    data = bytearray(_log_bytes(tmp_path, 30))
    records = list(iter_records(bytes(data), source="t"))
    bad = records[6]  # record 0: the file version
    data[bad.offset + where] ^= 0xFF
    with create_trial(str(_finished_log(tmp_path, bytes(data))), trial_format="tensorboard") as t:
        assert t.steps() == [s for s in range(30) if s != 5]
        assert float(t.tensor("loss").value(29)) == -19.0
        (problem,) = t.data_problems
        assert problem["problem"] == "corrupt" and problem["file"].endswith(KEY)
        assert problem["offset"] == bad.offset and problem["step"] == 4
        assert f"{bad.offset} to {records[7].offset}" in problem["detail"], field


def test_a_bad_crc_at_the_tail_of_a_live_file_is_read_again_later(tmp_path: Path) -> None:
    """A live file whose last record fails its CRC may be one whose bytes are not all
    flushed yet: nothing is skipped, the record is read again once the file grows (here,
    whole), and no data problem is told for it; a record torn later, when the run ends, is
    told as what it is (``truncated``), not as the CRC failure that came right."""
    whole = _log_bytes(tmp_path, 6)
    data = bytearray(whole)
    last = list(iter_records(whole, source="t"))[-1]
    data[last.offset + 14 :] = bytes(len(data) - last.offset - 14)  # not flushed: zeros
    storage = MemoryStorage({KEY: bytes(data)}, uri="memory://live")
    with create_trial("memory://live", storage=storage, trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 2, 3, 4]
        grown = whole + _log_bytes(tmp_path / "more", 9)[len(whole) :]
        storage.put(KEY, grown[:-7])
        trial.refresh_data()
        assert trial.steps() == list(range(8))
        assert trial.data_problem_count == 0
        storage.put(END_OF_JOB_KEY, b"")
        assert trial.training_ended()
        trial.refresh_data()
        (problem,) = trial.data_problems
        assert problem["problem"] == "truncated"


def test_a_bad_crc_tail_left_when_the_run_ends_is_a_data_problem(tmp_path: Path) -> None:
    """The live tail that failed its CRC and never became valid: once the run has ended
    (its end marker), it is a ``corrupt`` data problem naming the file and the offset."""
    data = bytearray(_log_bytes(tmp_path, 6))
    last = list(iter_records(bytes(data), source="t"))[-1]
    data[last.offset + 14] ^= 0xFF
    storage = MemoryStorage({KEY: bytes(data)}, uri="memory://live")
    with create_trial("memory://live", storage=storage, trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 2, 3, 4] and trial.data_problem_count == 0
        storage.put(END_OF_JOB_KEY, b"")
        assert trial.training_ended()
        trial.refresh_data()
        (problem,) = trial.data_problems
        assert problem["problem"] == "corrupt" and problem["offset"] == last.offset
        assert "footer" in problem["detail"] and "run has ended" in problem["detail"]


@pytest.mark.parametrize("tail", ["bad_crc", "torn"])
def test_a_tail_left_when_idle_scans_end_the_run_is_a_data_problem(
    tmp_path: Path, tail: str
) -> None:
    """TensorBoard writes no end marker: when idle scans end the run, a live file's tail that
    failed its CRC (``corrupt``) or was cut short (``truncated``) is a data problem naming
    the file and the offset before the trial is complete (before: nothing, a quiet end)."""
    whole = _log_bytes(tmp_path, 6)
    last = list(iter_records(whole, source="t"))[-1]
    data = bytearray(whole)
    if tail == "bad_crc":
        data[last.offset + 14] ^= 0xFF
    else:
        data = data[:-7]
    storage = MemoryStorage({KEY: bytes(data)}, uri="memory://idle")
    with create_trial(
        "memory://idle",
        storage=storage,
        trial_format="tensorboard",
        idle_scans_to_complete=1,
        poll_interval=0.01,
    ) as trial:
        assert trial.steps() == [0, 1, 2, 3, 4] and trial.data_problem_count == 0
        for _ in range(20):
            if trial.loaded_all_steps:
                break
            time.sleep(0.02)
            trial.refresh_data()
        assert trial.loaded_all_steps
        (problem,) = trial.data_problems
        want = "corrupt" if tail == "bad_crc" else "truncated"
        assert problem["problem"] == want and problem["offset"] == last.offset
        assert problem["file"].endswith(KEY) and problem["trial_complete"]


def test_a_bad_crc_live_tail_longer_than_a_read_is_not_read_again_and_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live file read in parts, stopped at a record that fails its CRC with unflushed zeros
    after it: the scan reads on to the end of what is listed once, not the same record over
    and over (the record itself is whole, so its length fits the file)."""
    monkeypatch.setattr("evaluator.sources.tensorboard.source._READ_BYTES", 1024)

    class Counted(MemoryStorage):
        async def read_range(self, key: str, start: int, end: int) -> bytes:
            assert self.calls["read_range"] < 50, "the same bytes read again and again"
            return await super().read_range(key, start, end)

    data = bytearray(_log_bytes(tmp_path, 6))
    last = list(iter_records(bytes(data), source="t"))[-1]
    data[last.offset + 14] ^= 0xFF
    storage = Counted({KEY: bytes(data) + bytes(8192)}, uri="memory://parts")
    with create_trial("memory://parts", storage=storage, trial_format="tensorboard") as trial:
        assert trial.steps() == [0, 1, 2, 3, 4] and trial.data_problem_count == 0
        assert storage.calls["read_range"] <= 3
