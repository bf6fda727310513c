"""Live latency: how long after a step's index file lands in S3 does ``wait_for_steps`` see it.

Two roles, each a process of its own, both talking to the same S3 endpoint (``AWS_ENDPOINT_URL``,
a moto server on 127.0.0.1 in bench/run.py --live):

``writer`` (the project's venv: it uses ``evaluator.testing.TrialWriter`` and boto3)
    Writes the whole trial into a temporary folder first (``--steps`` steps of ``--tensors``
    float32 tensors of ``--size`` values, TRAIN mode, one worker), loads every file into memory,
    creates the bucket and uploads the collections file, then prints ``{"event": "ready"}`` and
    waits for a ``go`` line on stdin. Then it uploads one step every ``--pace`` seconds: the event
    file, then the index file, and prints ``{"event": "step", "step": s, "index_done": t}`` where
    ``t`` is ``time.monotonic()`` right after the index file's PUT returned. ``--end-delay``
    seconds after the last step it uploads ``training_job_end.ts`` and prints ``done``.

``reader`` (``--impl ours`` under the project's venv, ``--impl smdebug`` under smdebug's)
    ``create_trial(uri)`` (ours with ``poll_interval=--poll-interval``; smdebug has no such
    option: its ``wait_for_steps`` sleeps 2 s between checks), prints ``ready``, then for each
    step in order calls ``wait_for_steps([s])`` and prints ``{"event": "visible", "step": s,
    "t": time.monotonic()}`` as soon as it returns.

The latency of step s is the reader's ``t`` minus the writer's ``index_done``. Both are
``CLOCK_MONOTONIC`` readings of the same machine (Linux: one clock for all processes).
Every wait is bounded: the writer gives up on ``go`` after ``--go-timeout`` seconds, and
bench/run.py kills either process at its deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)


def emit(**fields) -> None:
    print(json.dumps(fields, sort_keys=True), flush=True)


def tensor_names(n: int) -> list[str]:
    return [f"weights/layer{i}_weight" for i in range(n)]


# --------------------------------------------------------------------------------------------
# writer


def build_trial(folder: str, steps: int, tensors: int, size: int, seed: int) -> tuple[list, list]:
    """Write the trial with our TrialWriter; return (collections [(key, bytes)], steps [(step, event, index)])."""
    sys.path.insert(0, REPO_ROOT)
    import numpy as np

    from evaluator.formats import Collection
    from evaluator.formats.keys import collections_key, event_key, index_key
    from evaluator.modes import ModeKeys
    from evaluator.testing import TrialWriter

    worker = "worker_0"
    writer = TrialWriter(folder, worker=worker)
    writer.write_collections(
        [Collection("weights", include_regex=["^weights/"]), Collection("default")]
    )
    rng = np.random.default_rng(seed)
    names = tensor_names(tensors)
    for step in range(steps):
        values = {name: rng.standard_normal(size).astype(np.float32) for name in names}
        writer.write_step(step, values, mode=ModeKeys.TRAIN, mode_step=step)

    def read(key: str) -> bytes:
        with open(os.path.join(folder, key), "rb") as f:
            return f.read()

    collections = [(collections_key(worker), read(collections_key(worker)))]
    plan = [
        (
            step,
            (event_key(step, worker), read(event_key(step, worker))),
            (index_key(step, worker), read(index_key(step, worker))),
        )
        for step in range(steps)
    ]
    return collections, plan


def wait_for_go(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sys.stdin], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            line = sys.stdin.readline()
            if not line:
                return False  # stdin closed: the runner gave up
            if line.strip() == "go":
                return True
    return False


def writer_main(args: argparse.Namespace) -> int:
    import boto3

    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        collections, plan = build_trial(tmp, args.steps, args.tensors, args.size, args.seed)
    s3 = boto3.client("s3")
    try:
        s3.create_bucket(Bucket=args.bucket)
    except (s3.exceptions.BucketAlreadyOwnedByYou, s3.exceptions.BucketAlreadyExists):
        pass
    prefix = args.prefix.strip("/")
    for key, body in collections:
        s3.put_object(Bucket=args.bucket, Key=f"{prefix}/{key}", Body=body)
    s3.list_objects_v2(Bucket=args.bucket, Prefix=prefix + "/", MaxKeys=1)  # connection warm
    emit(
        event="ready",
        steps=len(plan),
        event_bytes=len(plan[0][1][1]) if plan else 0,
        index_bytes=len(plan[0][2][1]) if plan else 0,
    )
    if not wait_for_go(args.go_timeout):
        emit(event="error", error=f"no 'go' within {args.go_timeout} s")
        return 1
    t0 = time.monotonic()
    for i, (step, (ekey, ebody), (ikey, ibody)) in enumerate(plan):
        due = t0 + i * args.pace
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        started = time.monotonic()
        s3.put_object(Bucket=args.bucket, Key=f"{prefix}/{ekey}", Body=ebody)
        index_start = time.monotonic()
        s3.put_object(Bucket=args.bucket, Key=f"{prefix}/{ikey}", Body=ibody)
        emit(
            event="step",
            step=step,
            started=started,
            index_start=index_start,
            index_done=time.monotonic(),
        )
    time.sleep(args.end_delay)
    s3.put_object(Bucket=args.bucket, Key=f"{prefix}/training_job_end.ts", Body=b"")
    emit(event="done", end_marker=time.monotonic())
    return 0


# --------------------------------------------------------------------------------------------
# reader


def reader_main(args: argparse.Namespace) -> int:
    t = time.monotonic()
    if args.impl == "smdebug":
        import smdebug
        from smdebug.trials import create_trial

        version = getattr(smdebug, "__version__", "?")
        kwargs: dict = {}
        poll = 2.0  # smdebug's wait_for_steps sleeps 2 s between checks (hard-coded)
    else:
        sys.path.insert(0, REPO_ROOT)
        from evaluator.trial import create_trial

        version = "ours"
        kwargs = {"poll_interval": args.poll_interval}
        poll = args.poll_interval
    import_s = time.monotonic() - t
    t = time.monotonic()
    trial = create_trial(args.uri, **kwargs)
    emit(
        event="ready",
        impl=args.impl,
        version=version,
        poll_interval=poll,
        import_s=round(import_s, 3),
        create_trial_s=round(time.monotonic() - t, 3),
        python=sys.version.split()[0],
    )
    for step in range(args.steps):
        called = time.monotonic()
        trial.wait_for_steps([step])
        emit(event="visible", step=step, t=time.monotonic(), called=called)
    emit(event="done")
    stop = getattr(trial, "stop_polling", None) or getattr(trial, "close", None)
    if callable(stop):
        try:
            stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    sys.stdout.flush()
    os._exit(0)  # do not wait for background threads of either library


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTEST_CURRENT_TEST"):
        print(
            "bench/live.py is a benchmark; it is never run inside the test suite", file=sys.stderr
        )
        return 2
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="role", required=True)
    w = sub.add_parser("writer")
    w.add_argument("--bucket", required=True)
    w.add_argument("--prefix", required=True)
    w.add_argument("--steps", type=int, default=60)
    w.add_argument("--tensors", type=int, default=4)
    w.add_argument("--size", type=int, default=256)
    w.add_argument("--seed", type=int, default=1234)
    w.add_argument(
        "--pace", type=float, default=0.3, help="seconds between the starts of two step uploads"
    )
    w.add_argument("--end-delay", type=float, default=5.0)
    w.add_argument("--go-timeout", type=float, default=300.0)
    r = sub.add_parser("reader")
    r.add_argument("--impl", required=True, choices=("ours", "smdebug"))
    r.add_argument("--uri", required=True)
    r.add_argument("--steps", type=int, default=60)
    r.add_argument("--poll-interval", type=float, default=1.0, help="ours only")
    args = p.parse_args(argv)
    return writer_main(args) if args.role == "writer" else reader_main(args)


if __name__ == "__main__":
    sys.exit(main())
