"""What ``rule-evaluator watch`` costs per live run: memory and CPU of the watch process, its
fork server and every run's processes, with N TensorBoard runs growing under the watched root
(or, with ``--mlflow``, N RUNNING runs of an MLflow experiment in a SQLite store, each logging
``loss`` through MLflow's client, watched with ``--mlflow-experiment``).

    .venv/bin/python bench/watch_cost.py --runs 200 --poll-interval 10 --seconds 60
    .venv/bin/python bench/watch_cost.py --runs 200 --poll-interval 10 --runs-per-worker 0
    .venv/bin/python bench/watch_cost.py --mlflow --runs 10 --poll-interval 10 --seconds 60

``--runs-per-worker`` is the watch's flag (default: the watch's own, 50 runs sharing one
evaluation process; 0: two processes of its own for each run). In the output, the
``supervisors`` are the fork server's children (one per run, or one per shared worker) and
the ``evaluations`` their children (each run's, or the workers').

Each run gets one ``loss`` value every ``--write-interval`` seconds (one event appended to
its event file). After a warm-up (every run started and ``InProgress`` in the watch's status,
then two more poll intervals), the script samples the resident memory (RSS, summed over the
process tree) and the CPU time of the tree during ``--seconds``, takes the tree's PSS, then
stops the watch with SIGTERM and prints one JSON line. ``cpu_seconds_per_run_poll`` is the
tree's CPU time divided by the runs' polls in the window (runs x seconds / poll interval):
less noisy than a percentage on a shared machine. ``system_cpu_percent`` is the kernel's
part of the tree's CPU (writes, syncs, renames, reads). Not a test: the suite never runs it (it
refuses to run under pytest). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.formats.proto import event_pb2, summary_pb2  # noqa: E402
from evaluator.formats.tfrecord import encode_record  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _record(event: event_pb2.Event) -> bytes:
    return encode_record(event.SerializeToString(), payload_crc=True)


def _append(path: Path, step: int) -> None:
    summary = summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag="loss", simple_value=2.0 / (step + 1))]
    )
    with open(path, "ab") as f:
        f.write(_record(event_pb2.Event(wall_time=time.time(), step=step, summary=summary)))


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _pss(pid: int) -> int:
    """Proportional set size (shared pages split between their processes), bytes."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory(pid: int, *, own: bool = False) -> tuple[int, int]:
    """(RSS, PSS) bytes of ``pid`` alone (``own``) or of its tree."""
    pids = [pid] if own else _tree(pid)
    rss = sum(_sample_one(p)[0] for p in pids)
    return rss, sum(_pss(p) for p in pids)


def _sample_one(pid: int) -> tuple[int, float]:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        statm = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return 0, 0.0
    return int(statm[1]) * PAGE, (int(fields[11]) + int(fields[12])) / TICKS


def _sample(pid: int) -> tuple[int, float, dict[int, float], float]:
    """(RSS bytes of the tree, its CPU seconds, CPU seconds per process of the tree, and the
    tree's system (kernel) CPU seconds: writes, syncs, renames, reads)."""
    rss, cpu, system = 0, {}, 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            statm = Path(f"/proc/{p}/statm").read_text().split()
        except OSError:
            continue
        rss += int(statm[1]) * PAGE
        cpu[p] = (int(fields[11]) + int(fields[12])) / TICKS
        system += int(fields[12])
    return rss, sum(cpu.values()), cpu, system / TICKS


def _is_fork_server(pid: int) -> bool:
    try:
        return b"container.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def _cpu_percent(
    pids: list[int], end: dict[int, float], start: dict[int, float], seconds: float
) -> float:
    """The CPU of ``pids`` in the window, % of one core (processes measured throughout only)."""
    used = sum(end[p] - start[p] for p in pids if p in start and p in end)
    return round(100 * used / seconds, 1)


def _all_in_progress(out: Path, runs: int) -> bool:
    """Whether the watch's status lists every run, none queued or starting."""
    try:
        status = json.loads((out / "watch_status.json").read_text())
    except (OSError, ValueError):
        return False
    listed = [r for r in status["runs"] if r["status"] not in ("Queued", "Starting")]
    return len(listed) >= runs


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--write-interval", type=float, default=0.5)
    parser.add_argument("--poll-interval", default="1")
    parser.add_argument("--warm-up-limit", type=float, default=600.0)
    parser.add_argument("--mlflow", action="store_true", help="runs of an MLflow experiment")
    parser.add_argument("--runs-per-worker", default=None, help="the watch's flag")
    return parser.parse_args()


class _TensorBoardRuns:
    """``count`` TensorBoard runs under ``folder/runs``, each an event file, growing."""

    def __init__(self, folder: Path, count: int) -> None:
        self.root = folder / "runs"
        self.files = _make_runs(self.root, count)

    def watched(self) -> list[str]:
        return [str(self.root)]

    def append(self, step: int) -> None:
        for path in self.files:
            _append(path, step)


class _MlflowRuns:
    """``count`` RUNNING runs of the experiment ``bench`` in ``folder/mlflow.db``, growing."""

    def __init__(self, folder: Path, count: int) -> None:
        from mlflow import MlflowClient

        self.uri = f"sqlite:///{folder / 'mlflow.db'}"
        self.client = MlflowClient(self.uri)
        experiment = self.client.create_experiment("bench", str(folder / "artifacts"))
        self.ids = [self.client.create_run(experiment).info.run_id for _ in range(count)]

    def watched(self) -> list[str]:
        return ["--mlflow-experiment", "bench", "--mlflow-tracking-uri", self.uri]

    def append(self, step: int) -> None:
        for run_id in self.ids:
            self.client.log_metric(run_id, "loss", 2.0 / (step + 1), step=step)


def _make_runs(root: Path, count: int) -> list[Path]:
    """``count`` TensorBoard runs under ``root``, each an event file with its header only."""
    files = []
    for i in range(count):
        (root / f"run{i}").mkdir(parents=True)
        path = root / f"run{i}" / f"events.out.tfevents.{int(time.time())}.bench.1.0"
        path.write_bytes(
            _record(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        )
        files.append(path)
    return files


def _results_written(out: Path, status: dict[str, Any]) -> int:
    """How many of the runs in ``status`` have their result file."""
    return sum((out / r["run"] / "rule_evaluation_result.json").is_file() for r in status["runs"])


def _watch_command(args: argparse.Namespace, watched: list[str], out: Path) -> list[str]:
    """The watch of the runs, every run live (``--max-live``), with ``--runs-per-worker``."""
    command = [sys.executable, "-m", "container.cli", "watch", *watched, "--rule",
               "ExplodingTensor,LossNotDecreasing", "--output-dir", str(out),
               "--poll-interval", args.poll_interval, "--max-live", str(args.runs)]  # fmt: skip
    if args.runs_per_worker is not None:
        command += ["--runs-per-worker", args.runs_per_worker]
    return command


def main() -> int:
    if "pytest" in sys.modules:
        raise SystemExit("a benchmark, not a test")
    args = _arguments()
    with tempfile.TemporaryDirectory(prefix="watch-cost-") as folder:
        out = Path(folder) / "out"
        runs = (_MlflowRuns if args.mlflow else _TensorBoardRuns)(Path(folder), args.runs)
        watch = subprocess.Popen(
            _watch_command(args, runs.watched(), out),
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        step = 0

        def write_for(seconds: float) -> None:
            nonlocal step
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                runs.append(step)
                step += 1
                time.sleep(args.write_interval)

        write_for(15.0)  # warm-up: every run started and reading
        warm_up_end = time.monotonic() + args.warm_up_limit
        while not _all_in_progress(out, args.runs) and time.monotonic() < warm_up_end:
            write_for(2.0)
        write_for(2 * float(args.poll_interval))
        rss_start, cpu_start, watch_cpu_start, system_start = _sample(watch.pid)
        peak = rss_start
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            write_for(min(2.0, end - time.monotonic()))
            peak = max(peak, _sample(watch.pid)[0])
        rss_end, cpu_end, per_process, system_end = _sample(watch.pid)
        _, pss_end = memory(watch.pid)
        watcher = [p for p in _tree(watch.pid) if p == watch.pid or _parent(p) == watch.pid]
        watch_rss = sum(memory(p, own=True)[0] for p in watcher)
        watch_pss = sum(memory(p, own=True)[1] for p in watcher)
        watch_cpu = sum(per_process.get(p, 0) - watch_cpu_start.get(p, 0) for p in watcher)
        servers = [p for p in _tree(watch.pid) if _parent(p) in watcher and _is_fork_server(p)]
        supervisors = [p for p in per_process if _parent(p) in servers]
        evaluations = [p for p in per_process if _parent(p) in supervisors]
        start = watch_cpu_start  # every process's CPU when the window opened
        server_pss = sum(memory(p, own=True)[1] for p in servers)
        polls = args.runs * args.seconds / float(args.poll_interval)
        processes = len(per_process)
        own = [p for p in per_process if p in watch_cpu_start]
        stopped = time.monotonic()
        watch.send_signal(signal.SIGTERM)
        code = watch.wait(timeout=30)
        status = json.loads((out / "watch_status.json").read_text())
        print(json.dumps({
            "runs": args.runs,
            "kind": "mlflow" if args.mlflow else "tensorboard",
            "runs_per_worker": args.runs_per_worker or "default",
            "results_written": _results_written(out, status),
            "load_average": [round(x, 1) for x in os.getloadavg()],
            "processes": processes,
            "rss_mb": round(rss_end / 2**20, 1),
            "rss_peak_mb": round(peak / 2**20, 1),
            "rss_per_run_mb": round(rss_end / 2**20 / args.runs, 1),
            "pss_mb": round(pss_end / 2**20, 1),
            "watch_itself_rss_mb": round(watch_rss / 2**20, 1),
            "watch_itself_pss_mb": round(watch_pss / 2**20, 1),
            "fork_server_pss_mb": round(server_pss / 2**20, 1),
            "pss_per_run_mb": round((pss_end - watch_pss - server_pss) / 2**20 / args.runs, 2),
            "pss_per_run_with_server_mb": round((pss_end - watch_pss) / 2**20 / args.runs, 2),
            "watch_itself_cpu_percent": round(100 * watch_cpu / args.seconds, 2),
            "cpu_percent_of_one_core": round(100 * (cpu_end - cpu_start) / args.seconds, 1),
            "system_cpu_percent": round(100 * (system_end - system_start) / args.seconds, 1),
            "cpu_percent_per_run": round(100 * (cpu_end - cpu_start) / args.seconds / args.runs, 3),
            "cpu_seconds_per_run_poll": round((cpu_end - cpu_start) / polls, 4),
            "supervisors_cpu_percent": _cpu_percent(supervisors, per_process, start, args.seconds),
            "evaluations_cpu_percent": _cpu_percent(evaluations, per_process, start, args.seconds),
            "processes_measured_throughout": len(own),
            "steps_written": step,
            "stop_seconds": round(time.monotonic() - stopped, 2),
            "exit_code": code,
            "statuses": sorted({r["status"] for r in status["runs"]}),
        }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
