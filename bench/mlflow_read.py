"""Reading an MLflow run's metric histories from a tracking server: the evaluator's reader
against ``MlflowClient().get_metric_history`` per key, in one run (docs/DESIGN.md §6: at least
5x faster).

A run of ``--keys`` keys x ``--steps`` steps is logged to a SQLite store through MLflow's client
(``log_batch``; ``--keep DIR`` keeps that store for the next run, as logging 1M values takes
minutes), a real ``mlflow server`` serves that store on 127.0.0.1, and these sides read every
key's whole history from it, alternating, ``--repeat`` times each:

* ``mlflow``: ``MlflowClient(server).get_metric_history(run_id, key)`` for each key in turn;
* ``ours``: ``evaluator.sources.mlflow.client.RunClient.histories`` (what a trial's scans call);
* ``floor_history``: the server's answers to ``get-history`` (the documented request the
  evaluator sends, ``evaluator.sources.mlflow.rest``), one key after another, bytes read and
  nothing else: what the server itself costs per key, which no reader can cut;
* ``floor_bulk``: the same for the bulk history request of MLflow's web UI, which is not part
  of MLflow's documented API and which the evaluator does not send: what the server would
  cost on it.

For each side the server's CPU seconds (its process and workers, from /proc) and the reader's
own are taken beside the wall time: the server's CPU per value on each request is the floor of
any reader on the same cores. Both readers' values are compared (the same steps and values for
every key) before any time is taken. Prints one JSON line; ``--write`` puts a section into
bench/RESULTS.md. Not a test: run it by hand, never beside the test suite
(``python bench/mlflow_read.py``, about 10 minutes with the logging).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.sources.mlflow.client import RunClient, history_of  # noqa: E402
from evaluator.sources.mlflow.location import RunLocation  # noqa: E402
from evaluator.sources.mlflow.rest import HISTORY_ENDPOINT  # noqa: E402
from tests.support import mlflow_runs  # noqa: E402
from tests.support.mlflow_runs import log_run, start_server  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "## MLflow: a run's metric histories from a tracking server"
SIDES = ("mlflow", "ours", "floor_history", "floor_bulk")
_TICK = os.sysconf("SC_CLK_TCK")
BULK_ENDPOINT = "/ajax-api/2.0/mlflow/metrics/get-history-bulk"  # MLflow's web UI's, undocumented
BULK_MOST = 25_000  # the most values that request answers
# A server over a store of 1M values takes minutes to start on a busy machine (tests wait 90 s).
mlflow_runs.SERVER_START_SECONDS = 600.0


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


def _answers(endpoint: str, extra: dict[str, Any]) -> Callable[[str, str, list[str]], int]:
    def read(uri: str, run_id: str, keys: list[str]) -> int:
        got = 0
        for key in keys:
            query = urllib.parse.urlencode({"run_id": run_id, "metric_key": key, **extra})
            with urllib.request.urlopen(f"{uri}{endpoint}?{query}") as answer:
                got += len(answer.read())
        return got

    return read


READERS: dict[str, Callable[[str, str, list[str]], Any]] = {
    "mlflow": _theirs,
    "ours": _ours,
    "floor_history": _answers(HISTORY_ENDPOINT, {}),
    "floor_bulk": _answers(BULK_ENDPOINT, {"max_results": BULK_MOST}),
}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[k].steps, b[k].steps) and np.array_equal(a[k].values, b[k].values)
        for k in a
    )


def _server_pids(port: int) -> list[int]:
    """The server's processes: those whose command line holds ``--port <port>``, and their
    children (uvicorn's workers)."""
    parents: dict[int, int] = {}
    roots = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            parents[int(entry.name)] = int(
                (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            )
        except (OSError, ValueError):
            continue
        if b"--port" in args and str(port).encode() in args:
            roots.append(int(entry.name))
    found, todo = set(roots), list(roots)
    while todo:
        pid = todo.pop()
        kids = [child for child, parent in parents.items() if parent == pid]
        found.update(kids)
        todo += kids
    return sorted(found)


def _cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def _timed(pids: list[int], side: Callable[..., Any], *args: Any) -> tuple[float, float, float]:
    """Wall seconds, the server's CPU seconds and this process's CPU seconds of one side."""
    server, own, started = _cpu(pids), time.process_time(), time.perf_counter()
    side(*args)
    wall = time.perf_counter() - started
    return wall, _cpu(pids) - server, time.process_time() - own


def _logged(keys: int, steps: int, folder: Path) -> tuple[str, float]:
    """The run's id in ``folder``'s store (logged now unless a kept one matches), and the
    seconds its logging took (0 when kept)."""
    meta = folder / "run.json"
    wanted = {"keys": keys, "steps": steps}
    if meta.is_file() and (kept := json.loads(meta.read_text()))["shape"] == wanted:
        return str(kept["run_id"]), 0.0
    (folder / "server.db").unlink(missing_ok=True)
    started = time.perf_counter()
    run_id = log_run(f"sqlite:///{folder}/server.db", _metrics(keys, steps), experiment="bench")
    meta.write_text(json.dumps({"shape": wanted, "run_id": run_id}))
    return run_id, time.perf_counter() - started


def _measure(url: str, run_id: str, keys: int, repeat: int) -> dict[str, list[tuple]]:
    names = [f"metric_{k:03d}" for k in range(keys)]
    if not _same(_theirs(url, run_id, names), _ours(url, run_id, names)):
        raise SystemExit("the two sides read different values")
    pids = _server_pids(int(url.rsplit(":", 1)[1]))
    times: dict[str, list[tuple]] = {side: [] for side in SIDES}
    for _ in range(repeat):
        for side in SIDES:
            times[side].append(_timed(pids, READERS[side], url, run_id, names))
    return times


def run(keys: int, steps: int, repeat: int, workers: int, keep: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mlflow-bench-") as scratch:
        folder = keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        run_id, logged = _logged(keys, steps, folder)
        with start_server(folder, workers=workers) as url:
            times = _measure(url, run_id, keys, repeat)
    points = keys * steps
    found: dict[str, Any] = {"keys": keys, "steps": steps, "repeat": repeat}
    found["log_seconds"] = round(logged, 1)
    for side, runs in times.items():
        found[f"{side}_seconds"] = [round(wall, 2) for wall, _, _ in runs]
        found[f"{side}_median"] = round(statistics.median(w for w, _, _ in runs), 2)
        found[f"{side}_server_cpu_per_1m"] = round(
            statistics.median(s for _, s, _ in runs) * 1e6 / points, 1
        )
        found[f"{side}_reader_cpu_per_1m"] = round(
            statistics.median(c for _, _, c in runs) * 1e6 / points, 1
        )
    found["speedup"] = round(found["mlflow_median"] / found["ours_median"], 2)
    found["speedup_each"] = [
        round(theirs[0] / ours[0], 2) for theirs, ours in zip(times["mlflow"], times["ours"])
    ]
    found["ceiling"] = _ceiling(found)
    found["load_average"] = round(os.getloadavg()[0], 1)
    found["server_workers"] = workers
    found["cpus"] = os.cpu_count()
    return found


ROWS = {
    "mlflow": "`get_metric_history` per key",
    "ours": "ours (`RunClient.histories`)",
    "floor_history": "floor: `get-history` answers, one key after another, bytes only",
    "floor_bulk": "the web UI's bulk request (not used: undocumented), one key after another, "
    "bytes only",
}


def _table(found: dict[str, Any]) -> str:
    lines = [
        "| side | seconds (median) | each run | server CPU s per 1M values | reader CPU s "
        "per 1M values |",
        "|---|---|---|---|---|",
    ]
    for side, label in ROWS.items():
        runs = ", ".join(map(str, found[f"{side}_seconds"]))
        lines.append(
            f"| {label} | {found[f'{side}_median']} | {runs} | "
            f"{found[f'{side}_server_cpu_per_1m']} | {found[f'{side}_reader_cpu_per_1m']} |"
        )
    return "\n".join(lines) + "\n"


def _ceiling(found: dict[str, Any]) -> float:
    """The most ours can gain on an idle machine with these CPUs: ``get_metric_history`` runs
    its requests one after another (the server's CPU, then its client's, per value), ours can at
    best keep every CPU busy with the server's work on the same requests and its own."""
    theirs = found["mlflow_server_cpu_per_1m"] + found["mlflow_reader_cpu_per_1m"]
    ours = found["ours_server_cpu_per_1m"] + found["ours_reader_cpu_per_1m"]
    return round(theirs / (ours / (os.cpu_count() or 1)), 2)


def _write(found: dict[str, Any]) -> None:
    text = RESULTS.read_text(encoding="utf-8")
    section = (
        f"{SECTION}\n\n"
        f"`bench/mlflow_read.py`: a run of {found['keys']} keys x {found['steps']} steps on a real "
        "`mlflow server` (SQLite behind it, on 127.0.0.1), every key's whole history read by "
        "`MlflowClient().get_metric_history` per key and by the evaluator's reader "
        f"(`RunClient.histories`), alternating, {found['repeat']} times each, same values "
        f"checked first; the server with {found['server_workers']} workers, "
        f"{found['cpus']} CPUs shared by server and reader. CPU seconds are the server's "
        "processes' and the reading process's, scaled to 1M values.\n\n"
        f"{_table(found)}\n"
        f"Ours is **{found['speedup']}x** faster by the medians (each alternating pair: "
        f"{', '.join(f'{r}x' for r in found['speedup_each'])}; target: at least 5x); load "
        f"average {found['load_average']} at the end (other work on the machine). The server's "
        "CPU per value bounds any reader: `get_metric_history` pays the server's `get-history` "
        "and its own client's CPU one request after another, ours at best the server's same "
        f"work spread over the {found['cpus']} CPUs, so an idle machine like this one allows "
        f"at most **{found['ceiling']}x** (a busy one lets ours gain more: the one-at-a-time "
        "reader waits for a CPU share at every request, while ours keeps the server's workers "
        "runnable). Most of the server's CPU per value is MLflow's own SQLAlchemy rows and "
        "`Metric` objects, which every history request pays.\n"
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
    parser.add_argument("--keep", type=Path, help="keep the logged store in this folder")
    parser.add_argument("--write", action="store_true", help="add the figures to RESULTS.md")
    args = parser.parse_args()
    found = run(args.keys, args.steps, args.repeat, args.workers, args.keep)
    print(json.dumps(found))
    if args.write:
        _write(found)


if __name__ == "__main__":
    main()
