"""How often one live run's evaluation process wakes, and why: its wake-ups per thread.

    .venv/bin/python bench/eval_wakeups.py --seconds 60 --poll-interval 10
    .venv/bin/python bench/eval_wakeups.py --grow            # one loss value a second
    .venv/bin/python bench/eval_wakeups.py --tree /work/other-checkout --sides 2

Starts ``rule-evaluator`` (its supervisor and evaluation processes) on one TensorBoard run
that holds ``--steps`` loss values, with rules ``ExplodingTensor,LossNotDecreasing``, the
given ``--poll-interval`` and idle scans set high (``EVALUATOR_IDLE_SCANS_TO_COMPLETE``), so
the run stays live whether or not it grows (``--grow`` appends one value a second). After a
warm-up it reads, over ``--seconds``, every thread's context switches (voluntary and
involuntary, ``/proc/PID/task/TID/status``: one switch is one wake-up of that thread) and CPU
time, and the processes' CPU seconds; then it stops the run with SIGTERM and times its exit.

The threads are named by what started them: a ``sitecustomize`` module on the measured
process's import path gives each Python thread its ``threading`` name as its Linux name
(``/proc/.../comm``, 15 characters), which Python 3.11 does not do; ``(main)`` is the main
thread. The threads are sampled every second: one that ended inside the window counts under
``(ended threads)`` as last sampled, one born and ended between two samples is missed (its
CPU is in the process's).

``--tree DIR`` measures another checkout (its ``.venv`` and code: an older commit in a second
worktree); several trees and ``--sides N`` alternate them in one session, one line of JSON per
measurement, so both sides see the same machine. Not a test (it refuses to run under pytest).
Linux only (/proc).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.formats.proto import event_pb2, summary_pb2  # noqa: E402
from evaluator.formats.tfrecord import encode_record  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
RULES = "ExplodingTensor,LossNotDecreasing"

# Loaded by the measured interpreter (and so by its forks): Linux thread names from Python's.
_NAMING = """
import ctypes, threading
_libc = ctypes.CDLL(None, use_errno=True)
_original = threading.Thread._set_native_id
def _set_native_id(self):
    _original(self)
    try:
        _libc.prctl(15, self.name.encode("utf-8", "replace")[:15], 0, 0, 0)  # PR_SET_NAME
    except Exception:
        pass
threading.Thread._set_native_id = _set_native_id
"""


def _record(event: event_pb2.Event) -> bytes:
    return encode_record(event.SerializeToString(), payload_crc=True)


def _append(path: Path, step: int) -> None:
    value = summary_pb2.Summary.Value(tag="loss", simple_value=2.0 / (step + 1))
    event = event_pb2.Event(
        wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=[value])
    )
    with open(path, "ab") as f:
        f.write(_record(event))


def _make_run(folder: Path, steps: int) -> Path:
    folder.mkdir(parents=True)
    path = folder / f"events.out.tfevents.{int(time.time())}.bench.1.0"
    path.write_bytes(_record(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")))
    for step in range(steps):
        _append(path, step)
    return path


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry))
    return found


def _switches(status: str) -> int:
    total = 0
    for line in status.splitlines():
        if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
            total += int(line.split()[1])
    return total


def _process(pid: int) -> float:
    """The CPU seconds of every thread the process had, living or ended."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / TICKS


def _threads(pid: int) -> dict[int, tuple[str, int, float]]:
    """Each living thread: (name, context switches, CPU seconds)."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            name = "(main)" if int(tid) == pid else Path(f"{base}/comm").read_text().strip()
            switches = _switches(Path(f"{base}/status").read_text())
            stat = Path(f"{base}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(tid)] = (name, switches, (int(stat[11]) + int(stat[12])) / TICKS)
    return found


def _evaluation_pid(supervisor: int, deadline: float) -> int:
    while time.monotonic() < deadline:
        for pid in _children(supervisor):
            try:
                if b"container.child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
            except OSError:
                continue
        time.sleep(0.2)
    raise SystemExit("the evaluation process did not start")


def _in_progress(out: Path) -> bool:
    try:
        result = json.loads((out / "rule_evaluation_result.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(result.get("rules")) and all(
        r.get("status") == "InProgress" for r in result["rules"]
    )


def measure(tree: Path, args: argparse.Namespace) -> dict[str, object]:
    """One measurement of the checkout at ``tree``."""
    with tempfile.TemporaryDirectory(prefix="eval-wakeups-") as folder:
        naming = Path(folder) / "naming"
        naming.mkdir()
        (naming / "sitecustomize.py").write_text(_NAMING)
        events = _make_run(Path(folder) / "run", args.steps)
        out = Path(folder) / "out"
        env = dict(os.environ, PYTHONPATH=str(naming), EVALUATOR_IDLE_SCANS_TO_COMPLETE="100000")
        run = subprocess.Popen(
            [str(tree / ".venv/bin/python"), "-m", "container.cli", "--trial-dir",
             str(Path(folder) / "run"), "--output-dir", str(out), "--rule", RULES,
             "--poll-interval", str(args.poll_interval), "--log-format", "json",
             *args.extra],
            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        step = args.steps
        try:
            evaluation = _evaluation_pid(run.pid, time.monotonic() + 60)
            deadline = time.monotonic() + 120
            while not _in_progress(out) and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(args.warm_up)
            start_process, start_threads = _process(evaluation), _threads(evaluation)
            start_supervisor = _process(run.pid), _threads(run.pid)
            last = dict(start_threads)
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                time.sleep(min(1.0, max(0.0, end - time.monotonic())))
                if args.grow:
                    _append(events, step)
                    step += 1
                last.update(_threads(evaluation))
            end_process, end_threads = _process(evaluation), _threads(evaluation)
            end_supervisor = _process(run.pid), _threads(run.pid)
            last.update(end_threads)
            stopped = time.monotonic()
            run.send_signal(signal.SIGTERM)
            code = run.wait(timeout=30)
            stop_seconds = time.monotonic() - stopped
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    return _report(tree, args, (start_process, end_process), (start_threads, last, end_threads),
                   (start_supervisor, end_supervisor), stop_seconds, code)  # fmt: skip


def _report(
    tree: Path,
    args: argparse.Namespace,
    process: tuple[float, float],
    threads: tuple[dict[int, tuple[str, int, float]], ...],
    supervisor: tuple[tuple[float, dict[int, tuple[str, int, float]]], ...],
    stop_seconds: float,
    code: int,
) -> dict[str, object]:
    start, last, living = threads
    seconds = args.seconds
    per_name: dict[str, list[float]] = {}
    for tid, (name, switches, cpu) in last.items():
        begun = start.get(tid, (name, 0, 0.0))
        label = name if tid in living else "(ended threads)"
        entry = per_name.setdefault(label, [0, 0.0, 0])
        entry[0] += switches - begun[1]
        entry[1] += cpu - begun[2]
        entry[2] += 1
    wakeups = sum(v[0] for v in per_name.values())  # (a thread born and ended between two
    cpu = process[1] - process[0]  # samples is missed: its CPU is in the process's)
    (supervisor_start, supervisor_threads), (supervisor_end, supervisor_end_threads) = supervisor
    supervisor_wakeups = sum(
        switches - supervisor_threads.get(tid, ("", 0, 0.0))[1]
        for tid, (_, switches, _) in supervisor_end_threads.items()
    )
    return {
        "tree": str(tree),
        "commit": _commit(tree),
        "grow": args.grow,
        "poll_interval": args.poll_interval,
        "seconds": seconds,
        "load_average": [round(x, 1) for x in os.getloadavg()],
        "wakeups_per_second": round(wakeups / seconds, 2),
        "cpu_seconds_per_minute": round(60 * cpu / seconds, 3),
        "supervisor_wakeups_per_second": round(supervisor_wakeups / seconds, 2),
        "supervisor_cpu_seconds_per_minute": round(60 * (supervisor_end - supervisor_start) / seconds, 3),
        "threads": {
            name: {"count": int(n), "wakeups_per_second": round(w / seconds, 2), "cpu_seconds": round(c, 2)}
            for name, (w, c, n) in sorted(per_name.items(), key=lambda kv: -kv[1][0])
        },
        "stop_seconds": round(stop_seconds, 2),
        "exit_code": code,
    }  # fmt: skip


def _commit(tree: Path) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "?"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--poll-interval", type=float, default=10.0)
    parser.add_argument("--steps", type=int, default=20, help="loss values before the start")
    parser.add_argument("--warm-up", type=float, default=15.0, help="seconds after InProgress")
    parser.add_argument("--grow", action="store_true", help="append one loss value a second")
    parser.add_argument("--tree", type=Path, action="append", help="checkouts to measure")
    parser.add_argument("--sides", type=int, default=1, help="measurements of each tree")
    parser.add_argument("extra", nargs="*", help="more rule-evaluator arguments (after --)")
    return parser.parse_args()


def main() -> int:
    if "pytest" in sys.modules:
        raise SystemExit("a benchmark, not a test")
    args = _arguments()
    trees = args.tree or [ROOT]
    for _ in range(args.sides):
        for tree in trees:
            print(json.dumps(measure(tree.resolve(), args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
