"""Trials that grow while they are read: S3 (moto server on 127.0.0.1) and local folders."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import NoMoreData
from evaluator.formats import Collection
from evaluator.formats.keys import END_OF_JOB_KEY, event_key, index_key
from evaluator.modes import ModeKeys
from evaluator.storage.s3 import S3Storage
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from tests.compat.golden import DATA

STEPS = 12
COLLECTIONS = [Collection("weights", include_regex=["^w"])]


def value_at(step: int) -> np.ndarray:
    return np.arange(8, dtype=np.float32) * (step + 1)


def write_local_steps(root: Path, steps: range) -> None:
    writer = TrialWriter(root)
    for s in steps:
        writer.write_step(s, {"w": value_at(s), "b": np.float32(s)}, mode=ModeKeys.TRAIN)


def read_all_steps(trial: Any, steps: int, seen: list[int]) -> None:
    """What a rule does: wait for each step in order, then read it."""
    for s in range(steps):
        trial.wait_for_steps([s])
        np.testing.assert_array_equal(trial.tensor("w").value(s), value_at(s))
        seen.append(s)


def run_concurrently(writer: Callable[[], None], reader: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # reported by the main thread below
                errors.append(e)

        return run

    threads = [threading.Thread(target=guarded(f)) for f in (writer, reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "reader or writer hung"
    if errors:
        raise errors[0]


def test_s3_trial_read_while_a_writer_uploads_steps(
    s3_server: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """Every step uploaded while the rule reads is seen, in order, with its values; the end
    marker then ends the run with NoMoreData."""
    local = tmp_path / "job"
    TrialWriter(local).write_collections(COLLECTIONS)
    s3_server.upload_folder(local, s3_bucket, "live")
    uri = f"s3://{s3_bucket}/live"
    trial = create_trial(uri, poll_interval=0.05, max_poll_interval=0.2)
    seen: list[int] = []

    def upload_steps() -> None:
        for s in range(STEPS):
            write_local_steps(local, range(s, s + 1))
            s3_server.put_objects(
                s3_bucket,
                {  # event file first, then its index, as S3 uploads go
                    event_key(s, "worker_0"): (local / event_key(s, "worker_0")).read_bytes(),
                },
                prefix="live/",
            )
            s3_server.put_objects(
                s3_bucket,
                {
                    index_key(s, "worker_0"): (local / index_key(s, "worker_0")).read_bytes(),
                },
                prefix="live/",
            )
            time.sleep(0.03)
        s3_server.put_objects(s3_bucket, {END_OF_JOB_KEY: b""}, prefix="live/")

    run_concurrently(upload_steps, lambda: read_all_steps(trial, STEPS, seen))
    assert seen == list(range(STEPS))
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([STEPS])
    trial.close()


def test_local_folder_written_concurrently(tmp_path: Path) -> None:
    """A folder the training job is still writing is followed step by step until its end."""
    TrialWriter(tmp_path).write_collections(COLLECTIONS)
    trial = create_trial(str(tmp_path), poll_interval=0.05, max_poll_interval=0.2)
    seen: list[int] = []

    def write() -> None:
        for s in range(STEPS):
            write_local_steps(tmp_path, range(s, s + 1))
            time.sleep(0.02)
        TrialWriter(tmp_path).end_training()

    run_concurrently(write, lambda: read_all_steps(trial, STEPS, seen))
    assert seen == list(range(STEPS))
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([STEPS])


def test_torn_event_file_is_waited_for_never_misread(tmp_path: Path) -> None:
    """An index file whose event file is missing, then only half written, gives the right
    value once the file is complete: never an error, never a wrong value."""
    TrialWriter(tmp_path).write_collections(COLLECTIONS)
    staging = tmp_path / "staging"
    TrialWriter(staging).write_step(0, {"w": value_at(0)}, mode=ModeKeys.TRAIN)
    event = (staging / event_key(0, "worker_0")).read_bytes()
    (tmp_path / index_key(0, "worker_0")).parent.mkdir(parents=True)
    (tmp_path / index_key(0, "worker_0")).write_bytes(
        (staging / index_key(0, "worker_0")).read_bytes()
    )
    trial = create_trial(str(tmp_path), poll_interval=0.05)
    target = tmp_path / event_key(0, "worker_0")

    def finish_slowly() -> None:
        time.sleep(0.2)
        target.parent.mkdir(parents=True)
        with open(target, "wb") as f:  # appended in place, not renamed: a torn record for a while
            f.write(event[: len(event) // 2])
            f.flush()
            time.sleep(0.3)
            f.write(event[len(event) // 2 :])

    writer = threading.Thread(target=finish_slowly)
    writer.start()
    np.testing.assert_array_equal(trial.tensor("w").value(0), value_at(0))
    writer.join()


def test_idle_poll_costs_one_list_request(s3_server: Any, upload_folder: Any) -> None:
    """A poll that finds nothing new sends exactly one ListObjectsV2 (end marker included)."""
    uri = upload_folder(DATA / "multiworker_running", "counts/idle")
    storage = S3Storage(uri, count_requests=True)
    trial = create_trial(uri, storage=storage)
    storage.request_counts.clear()
    trial.refresh_data()
    assert dict(storage.request_counts) == {"ListObjectsV2": 1}
    trial.close()


def test_k_tensors_of_one_step_cost_one_ranged_get(s3_server: Any, upload_folder: Any) -> None:
    """Reading every tensor of one step and worker costs one GET; value reads never LIST."""
    uri = upload_folder(DATA / "big", "counts/reads")
    storage = S3Storage(uri, count_requests=True)
    trial = create_trial(uri, storage=storage, prefetch_steps=0)
    names = trial.tensor_names()
    storage.request_counts.clear()
    for name in names:
        trial.tensor(name).value(5)
    assert len(names) == 10
    assert dict(storage.request_counts) == {"GetObject": 1}
    storage.request_counts.clear()
    for step in range(6, 16):
        for name in names:
            trial.tensor(name).value(step)
    assert dict(storage.request_counts) == {"GetObject": 10}
    trial.close()


def test_prefetch_fetches_next_steps_ahead_of_a_walk(s3_server: Any, upload_folder: Any) -> None:
    """A rule walking the steps in order finds the next steps' event files already fetched;
    random access fetches nothing ahead."""
    uri = upload_folder(DATA / "big", "counts/prefetch")
    storage = S3Storage(uri, count_requests=True)
    trial = create_trial(uri, storage=storage, prefetch_steps=2)
    loss = trial.tensor("loss")

    def gets_settle(expected: int) -> int:
        deadline = time.monotonic() + 10
        while storage.request_counts["GetObject"] < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # nothing more may arrive
        return storage.request_counts["GetObject"]

    storage.request_counts.clear()
    loss.value(20)
    loss.value(30)  # not a walk: nothing fetched ahead
    assert gets_settle(2) == 2
    loss.value(0)
    loss.value(1)  # a walk: steps 2 and 3 are fetched ahead
    assert gets_settle(6) == 6
    loss.value(2)  # served from the prefetched bytes; step 4 is fetched ahead
    assert gets_settle(7) == 7
    trial.close()


def test_copied_folder_without_end_marker_completes_after_idle_scans(tmp_path: Path) -> None:
    """With idle_scans_to_complete, a finished folder with no end marker ends instead of
    waiting forever (the docker-run-on-a-copy case)."""
    TrialWriter(tmp_path).write_collections(COLLECTIONS)
    write_local_steps(tmp_path, range(3))
    trial = create_trial(
        str(tmp_path), poll_interval=0.05, max_poll_interval=0.1, idle_scans_to_complete=2
    )
    started = time.monotonic()
    with pytest.raises(NoMoreData):
        trial.wait_for_steps([3])
    assert trial.loaded_all_steps
    assert time.monotonic() - started < 10
