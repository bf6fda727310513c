"""Reading an MLflow run's metric histories from a tracking server: the evaluator's reader
against ``MlflowClient().get_metric_history`` per key, in one run (docs/DESIGN.md §6: at least
5x faster).

A run of ``--keys`` keys x ``--steps`` steps is logged to a SQLite store through MLflow's client
(``log_batch``), a real ``mlflow server`` serves that store on 127.0.0.1, and the two sides read
every key's whole history from it, alternating, ``--repeat`` times each:

* ``mlflow``: ``MlflowClient(server).get_metric_history(run_id, key)`` for each key in turn;
* ``ours``: ``evaluator.sources.mlflow.client.RunClient.histories`` (what a trial's scans call);
* ``floor``: the same ``get-history`` requests, one key after another, their answers' bytes
  read and nothing else: what the server itself costs per key, which neither side can cut.

Both sides' values are compared (the same steps and values for every key) before any time is
taken. Prints one JSON line; ``--write`` adds a section to bench/RESULTS.md. Not a test: run
it by hand, never beside the test suite (``python bench/mlflow_read.py``, about 3 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.sources.mlflow.client import RunClient, history_of  # noqa: E402
from evaluator.sources.mlflow.location import RunLocation  # noqa: E402
from tests.support.mlflow_runs import log_run, start_server  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "## MLflow: a run's metric histories from a tracking server"


def _metrics(keys: int, steps: int) -> list[tuple[str, int, float]]:
    rng = np.random.default_rng(0)
    values = rng.random((keys, steps))
    return [(f"metric_{k:03d}", s, float(values[k, s])) for k in range(keys) for s in range(steps)]


def _theirs(uri: str, run_id: str, keys: list[str]) -> dict[str, Any]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    return {key: history_of(client.get_metric_history(run_id, key)) for key in keys}


def _ours(uri: str, run_id: str, keys: list[str]) -> dict[str, Any]:
    reader = RunClient(RunLocation(uri, run_id), deadline=600)
    try:
        return asyncio.run(reader.histories(run_id, keys))
    finally:
        reader.close()


def _floor(uri: str, run_id: str, keys: list[str]) -> int:
    got = 0
    for key in keys:
        query = urllib.parse.urlencode({"run_id": run_id, "metric_key": key})
        with urllib.request.urlopen(f"{uri}/api/2.0/mlflow/metrics/get-history?{query}") as r:
            got += len(r.read())
    return got


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k].steps, b[k].steps) and np.array_equal(a[k].values, b[k].values)
        for k in a
    )


def _timed(side: Any, *args: Any) -> float:
    started = time.perf_counter()
    side(*args)
    return time.perf_counter() - started


def run(keys: int, steps: int, repeat: int, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mlflow-bench-") as folder:
        store = f"sqlite:///{folder}/server.db"
        started = time.perf_counter()
        run_id = log_run(store, _metrics(keys, steps), experiment="bench")
        logged = time.perf_counter() - started
        with start_server(Path(folder), workers=workers) as url:
            names = [f"metric_{k:03d}" for k in range(keys)]
            if not _same(_theirs(url, run_id, names), _ours(url, run_id, names)):
                raise SystemExit("the two sides read different values")
            times: dict[str, list[float]] = {"mlflow": [], "ours": [], "floor": []}
            for _ in range(repeat):
                times["mlflow"].append(_timed(_theirs, url, run_id, names))
                times["ours"].append(_timed(_ours, url, run_id, names))
                times["floor"].append(_timed(_floor, url, run_id, names))
    median = {side: statistics.median(t) for side, t in times.items()}
    return {
        "keys": keys,
        "steps": steps,
        "repeat": repeat,
        "log_seconds": round(logged, 1),
        "mlflow_seconds": [round(t, 3) for t in times["mlflow"]],
        "ours_seconds": [round(t, 3) for t in times["ours"]],
        "mlflow_median": round(median["mlflow"], 3),
        "ours_median": round(median["ours"], 3),
        "floor_seconds": [round(t, 3) for t in times["floor"]],
        "floor_median": round(median["floor"], 3),
        "load_average": round(os.getloadavg()[0], 1),
        "speedup": round(median["mlflow"] / median["ours"], 2),
        "server_workers": workers,
        "cpus": os.cpu_count(),
    }


def _write(found: dict[str, Any]) -> None:
    text = RESULTS.read_text(encoding="utf-8")
    section = (
        f"{SECTION}\n\n"
        f"`bench/mlflow_read.py`: a run of {found['keys']} keys x {found['steps']} steps on a real "
        "`mlflow server` (SQLite behind it, on 127.0.0.1), every key's whole history read by "
        "`MlflowClient().get_metric_history` per key and by the evaluator's reader "
        f"(`RunClient.histories`), alternating, {found['repeat']} times each, same values "
        f"checked first; the server with {found['server_workers']} workers, "
        f"{found['cpus']} CPUs shared by server and reader.\n\n"
        "| side | seconds (median) | each run |\n|---|---|---|\n"
        f"| `get_metric_history` per key | {found['mlflow_median']} | "
        f"{', '.join(map(str, found['mlflow_seconds']))} |\n"
        f"| ours | {found['ours_median']} | {', '.join(map(str, found['ours_seconds']))} |\n"
        f"| floor: the server's answers, one key after another, bytes only | "
        f"{found['floor_median']} | {', '.join(map(str, found['floor_seconds']))} |\n\n"
        f"Ours is **{found['speedup']}x** faster (target: at least 5x); load average "
        f"{found['load_average']} at the end (other work on the machine).\n"
    )
    if SECTION in text:
        start = text.index(SECTION)
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + (text[end:] if end != -1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text, encoding="utf-8")


def main() -> None:
    if os.environ.get("PYTEST_CURRENT_TEST"):
        raise SystemExit("a benchmark, not a test: run it by hand")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="the server's worker processes")
    parser.add_argument("--write", action="store_true", help="add the figures to RESULTS.md")
    args = parser.parse_args()
    found = run(args.keys, args.steps, args.repeat, args.workers)
    print(json.dumps(found))
    if args.write:
        _write(found)


if __name__ == "__main__":
    main()
