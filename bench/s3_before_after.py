"""S3Storage of another commit against this tree's, in one run (issue 27's before and after).

    git archive BASE evaluator bench | tar -x -C /tmp/before
    .venv/bin/python bench/s3_before_after.py --before /tmp/before [--repeat 3]

Both sides run in fresh processes of ``.venv/bin/python``, alternating, against one moto server
on 127.0.0.1 (its own process, not counted):

* **client CPU per request**: ``bench/s3_cpu.py --impl ours`` of each tree (which imports that
  tree's ``evaluator``), through the keep-alive proxy of ``s3_cpu_run.py``: 1000 GETs of 300-byte
  objects, 200 idle LISTs, 5 full 1000-key pages; plus ``--impl obstore`` (obstore alone) of
  this tree, as the floor of the new client;
* **whole-trial metadata**: ``bench/workloads.py --impl ours --workload metadata`` of each tree
  on a trial of 2000 steps x 50 tensors (written by ``evaluator.testing.TrialWriter``: 2000 index
  files, 2000 event files): process CPU of the child (``RUSAGE_CHILDREN``, imports included) and
  its headline seconds.

Prints one Markdown table of medians; the raw figures go to ``bench/.work/s3_before_after.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]

import s3_cpu_run  # noqa: E402
from run import MOTO_SERVER_DEFAULT, OURS_PY_DEFAULT, WORK, MotoServer  # noqa: E402

PHASES = ("get", "list_idle", "list_page")


def _child(cmd: list[str], env: dict[str, str]) -> tuple[dict[str, Any] | None, float]:
    """The JSON line a bench script printed, and the child's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode or not lines:
        print(f"FAILED {cmd[1]}: {(p.stderr.strip().splitlines() or ['?'])[-1]}", file=sys.stderr)
        return None, cpu
    return json.loads(lines[-1]), cpu


def _trial(moto: MotoServer) -> str:
    """A 2000-step trial on moto; its URI."""
    import boto3
    import numpy as np

    from evaluator.formats import Collection
    from evaluator.modes import ModeKeys
    from evaluator.testing import TrialWriter

    local = os.path.join(tempfile.mkdtemp(), "trial")
    writer = TrialWriter(local)
    writer.write_collections([Collection("weights", include_regex=["^w"])])
    for step in range(2000):
        values = {f"w{i}": np.full(4, step, np.float32) for i in range(50)}
        writer.write_step(step, values, mode=ModeKeys.TRAIN)
    env = moto.env()
    client = boto3.client(
        "s3",
        endpoint_url=moto.url,
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    client.create_bucket(Bucket="bench-trial")
    files = [os.path.join(d, f) for d, _, names in os.walk(local) for f in names]
    from concurrent.futures import ThreadPoolExecutor

    def put(path: str) -> None:
        with open(path, "rb") as f:
            key = "t/" + os.path.relpath(path, local)
            client.put_object(Bucket="bench-trial", Key=key, Body=f.read())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))
    return "s3://bench-trial/t"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="an export of the commit to compare with")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--python", default=OURS_PY_DEFAULT)
    args = p.parse_args()
    trees = {"before": args.before, "after": REPO}
    cpu_runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": [], "obstore": []}
    trial_runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with MotoServer(MOTO_SERVER_DEFAULT) as moto:
        env = moto.env()
        s3_cpu_run.store_objects(moto.url, env, 1000)
        uri = _trial(moto)
        proxy, endpoint = s3_cpu_run.start_proxy(moto.url, args.python)
        cpu_env = {**env, "AWS_ENDPOINT_URL": endpoint}
        try:
            for _ in range(args.repeat):
                for side, tree, impl in [
                    ("before", trees["before"], "ours"),
                    ("after", REPO, "ours"),
                    ("obstore", REPO, "obstore"),
                ]:
                    script = os.path.join(tree, "bench", "s3_cpu.py")
                    cmd = [args.python, script, "--impl", impl, "--bucket", s3_cpu_run.BUCKET]
                    cmd += ["--prefix", s3_cpu_run.PREFIX, "--objects", "1000"]
                    result, _ = _child(cmd, cpu_env)
                    if result:
                        cpu_runs[side].append(result)
                for side, tree in trees.items():
                    script = os.path.join(tree, "bench", "workloads.py")
                    cmd = [args.python, script, "--impl", "ours", "--trial", uri]
                    result, cpu = _child(cmd + ["--workload", "metadata"], env)
                    if result:
                        trial_runs[side].append({**result, "child_cpu_s": cpu})
        finally:
            if proxy.stdin is not None:
                proxy.stdin.close()
            proxy.wait(10)
    os.makedirs(WORK, exist_ok=True)
    with open(os.path.join(WORK, "s3_before_after.json"), "w") as f:
        json.dump({"cpu": cpu_runs, "trial": trial_runs}, f)
    print("| side | GET ms | idle LIST ms | 1000-key page ms | trial metadata, process CPU s |")
    print("|---|---:|---:|---:|---:|")
    for side in ("before", "after", "obstore"):
        runs = cpu_runs[side]
        if not runs:
            continue
        cells = [statistics.median(r["phases"][ph]["cpu_ms_per"] for r in runs) for ph in PHASES]
        trial = trial_runs.get(side, [])
        metadata = f"{statistics.median(r['child_cpu_s'] for r in trial):.2f}" if trial else "–"
        print(f"| {side} | {cells[0]:.3f} | {cells[1]:.3f} | {cells[2]:.1f} | {metadata} |")
    every = [r for runs in cpu_runs.values() for r in runs]
    bodies = {r["body_digest"] for r in every}
    listed = all(r["idle_empty"] and r["page_matches"] for r in every)
    answers = {r["meta_checksum"] for runs in trial_runs.values() for r in runs}
    print(
        f"\n- same bytes: {len(bodies) == 1}; same keys: {listed}; same metadata: {len(answers) == 1}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
