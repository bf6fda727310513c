"""Many workers: how opening a trial grows with its index files (issue 28, item 2).

    .venv/bin/python bench/many_workers.py                       # local and S3 (moto), all sizes
    .venv/bin/python bench/many_workers.py --sizes 8x250,64x2000 --no-s3
    .venv/bin/python bench/many_workers.py --open TRIAL          # the child: one measurement

A trial of W workers x S steps (``evaluator.testing.TrialWriter``, see ``write_trial``: a
float32[16] gradient and a scalar loss per step and worker, one index file and one event file
per step and worker, W x S of each) is written once per size under
``bench/.work/many_workers/``. For each size, a fresh process (``--open``) imports the reader,
notes its resident memory, then opens the trial and answers ``steps()``, ``workers()`` and
``tensor_names()`` (every index file read and parsed), and reports the seconds (wall and CPU)
and the peak resident memory above what the imports took. On S3 the same trial is served by
a moto server in this process (the objects put straight into its backend; the child reads
them over HTTP like any client), so the wall time there is moto's as much as ours: the CPU
seconds of the child are ours alone.

The figures per 1,000 index files are the slopes of a least-squares line through the sizes
(time and memory against index files), so a fixed cost (imports, the first requests) does not
count; the largest size's own figures are given too. Results go to
``bench/results_scale.json`` and the section of bench/RESULTS.md (``bench/scale_report.py``).
Never run from the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORK = os.path.join(HERE, ".work", "many_workers")
DEFAULT_SIZES = "8x250,16x500,32x1000,64x2000"


def _rss_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def open_trial(path: str) -> dict:
    """The child: open the trial, answer the metadata, report time and memory."""
    sys.path.insert(0, REPO)
    from evaluator.trial import create_trial

    before = _rss_mib("VmRSS")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    with create_trial(path) as trial:
        steps = trial.steps()
        workers = trial.workers()
        names = trial.tensor_names()
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        peak = _rss_mib("VmHWM")
        held = _rss_mib("VmRSS")
    return {
        "seconds": round(seconds, 3),
        "cpu_s": round(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime, 3),
        "rss_before_mib": round(before, 1),
        "peak_above_mib": round(peak - before, 1),
        "held_above_mib": round(held - before, 1),
        "steps": len(steps),
        "workers": len(workers),
        "tensors": len(names),
    }


def write_trial(path: str, workers: int, steps: int) -> float:
    """W x S trial at ``path`` (kept between runs); the seconds it took, 0 when it existed.

    Worker 0's steps are written by ``TrialWriter``; every other worker's files are worker
    0's bytes with the worker's name in the index file's event file name (the only place an
    index or event file names its worker), written the same way (temporary file, rename):
    64 x 2,000 steps through TrialWriter alone would take minutes of CPU. Each worker's
    collections file is TrialWriter's, with ``num_workers`` = W, as smdebug writes it.
    """
    if os.path.exists(os.path.join(path, "training_job_end.ts")):
        return 0.0
    sys.path.insert(0, REPO)
    import numpy as np

    from evaluator.formats import Collection
    from evaluator.formats.keys import event_key, index_key
    from evaluator.modes import ModeKeys
    from evaluator.testing import TrialWriter

    start = time.perf_counter()
    writers = [TrialWriter(path, worker=f"worker_{w}") for w in range(workers)]
    collections = [
        Collection("gradients", include_regex=["^gradients/"]),
        Collection("losses", tensor_names={"loss"}),
    ]
    for writer in writers:
        writer.write_collections(collections, num_workers=workers)
    grad = np.linspace(-1, 1, 16, dtype=np.float32)
    for step in range(steps):
        writers[0].write_step(
            step,
            {"gradients/dense/kernel": grad, "loss": np.float32(1 / (step + 1))},
            mode=ModeKeys.TRAIN,
        )
        with open(os.path.join(path, index_key(step, "worker_0")), "rb") as f:
            index = f.read()
        with open(os.path.join(path, event_key(step, "worker_0")), "rb") as f:
            events = f.read()
        for w in range(1, workers):
            name = f"worker_{w}"
            own = index.replace(b"_worker_0.tfevents", f"_{name}.tfevents".encode())
            for key, data in ((event_key(step, name), events), (index_key(step, name), own)):
                target = os.path.join(path, key)
                with open(target + ".tmp", "wb") as f:
                    f.write(data)
                os.replace(target + ".tmp", target)
    writers[0].end_training()
    return time.perf_counter() - start


def _child(path: str, env: dict | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--open", path],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"--open {path} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class _S3:
    """A moto server in this process; trials put straight into its backend."""

    def __init__(self) -> None:
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.env.update(
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_REGION="us-east-1",
            AWS_DEFAULT_REGION="us-east-1",
            AWS_CONFIG_FILE=os.devnull,
            AWS_SHARED_CREDENTIALS_FILE=os.devnull,
            AWS_EC2_METADATA_DISABLED="true",
        )
        import boto3

        boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket="many-workers")

    def upload(self, folder: str, prefix: str) -> str:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for root, _, files in os.walk(folder):
            for name in files:
                full = os.path.join(root, name)
                key = f"{prefix}/{os.path.relpath(full, folder)}"
                with open(full, "rb") as f:
                    backend.put_object("many-workers", key, f.read())
        return f"s3://many-workers/{prefix}"

    def close(self) -> None:
        self.server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--open", metavar="TRIAL", help="(the child) open TRIAL and report")
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="WORKERSxSTEPS,... (local)")
    parser.add_argument("--s3-sizes", default=None, help="sizes on S3 (default: --sizes)")
    parser.add_argument("--no-s3", action="store_true", help="local only")
    args = parser.parse_args()
    if args.open:
        print(json.dumps(open_trial(args.open)))
        return 0
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    s3_sizes = (
        [tuple(int(v) for v in s.split("x")) for s in args.s3_sizes.split(",")]
        if args.s3_sizes
        else sizes
    )
    os.makedirs(WORK, exist_ok=True)
    results: dict = {"local": [], "s3": [], "cpu_count": os.cpu_count(), "load": os.getloadavg()}
    for workers, steps in sizes:
        path = os.path.join(WORK, f"{workers}x{steps}")
        written = write_trial(path, workers, steps)
        figures = _child(path)
        figures.update(workers_asked=workers, steps_asked=steps, index_files=workers * steps)
        figures["write_s"] = round(written, 1)
        assert (figures["workers"], figures["steps"]) == (workers, steps), figures
        results["local"].append(figures)
        print("local", json.dumps(figures), flush=True)
    if not args.no_s3:
        s3 = _S3()
        try:
            for workers, steps in s3_sizes:
                path = os.path.join(WORK, f"{workers}x{steps}")
                write_trial(path, workers, steps)
                uri = s3.upload(path, f"{workers}x{steps}")
                figures = _child(uri, s3.env)
                figures.update(
                    workers_asked=workers, steps_asked=steps, index_files=workers * steps
                )
                assert (figures["workers"], figures["steps"]) == (workers, steps), figures
                results["s3"].append(figures)
                print("s3", json.dumps(figures), flush=True)
        finally:
            s3.close()
    results["load"] = os.getloadavg()
    sys.path.insert(0, HERE)
    from scale_report import SECTION, store

    store("many_workers", results)
    print(open(SECTION).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
