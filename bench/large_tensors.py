"""Large tensors: three user-style rule bodies over megabyte tensors: ours, smdebug, the floor.

    .venv/bin/python bench/large_tensors.py                     # write the trial once, run all
    .venv/bin/python bench/large_tensors.py --steps 10 --repeat 3 --sides ours,floor
    .venv/bin/python bench/large_tensors.py --side ours|ours-serial|floor|floor-once --trial T
    bench/.work/venv-smdebug/bin/python bench/large_tensors.py --side smdebug --trial T

The trial (issue 28; ``bench/.work/large_tensors/<steps>``, written once by **smdebug 1.0.34's
own writer** under the smdebug venv, bench/setup_smdebug.sh): per step, 4 gradients and 4
weights of float32[1,000,000] (4 MB each) and a scalar loss, one worker, TRAIN mode: 40 steps
are 1.4 GB. Each side runs in a fresh process and runs, one after the other, the bodies of
three rules as users write them against the Trial API:

* VanishingGradient: per step, per gradient, ``mean(|g|)`` (compared with 1e-7);
* ExplodingTensor: per step, per tensor, ``isnan(v).any() or isinf(v).any()``;
* WeightUpdateRatio: per step after the first, per weight, ``norm(w_t - w_{t-1}) /
  norm(w_{t-1})``: ours and smdebug read both steps' values through the API (as the rule
  does), the floor reads each value once and keeps the previous step's.

``ours``: ``create_trial`` then ``trial.tensor(name).value(step)`` for each value the body
needs, the trial's defaults (its event files are read ahead in a second thread while the body
works); ``ours-serial``: the same with ``prefetch_steps=0``, nothing read ahead (what the
second core gives). ``smdebug``: smdebug 1.0.34's ``create_trial`` and ``value``, under its
venv. The floors, no reader at all (bench/large_floor.py): ``floor`` reads each step's event
file once per body (one open, one read into its own buffer, every record framed,
``numpy.frombuffer`` of the tensors the body needs, the same numpy work), ``floor-once`` each
event file once in the whole run (the three bodies' work on the step at hand);
``floor-reopen`` is the floor before issue 42, which opened the event file and read the record
for every value (it measured its own overhead: ours was 0.67x of it). Every side reports each
body's seconds and a checksum of every number the bodies
computed; the checksums must be equal. Medians over ``--repeat`` runs, alternating the sides;
stored in ``bench/results_scale.json`` and RESULTS.md's section (``bench/scale_report.py``).
Never run from the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SMDEBUG_PY = os.path.join(HERE, ".work", "venv-smdebug", "bin", "python")
SIZE = 1_000_000
GRADIENTS = [f"gradients/layer{i}/kernel" for i in range(4)]
WEIGHTS = [f"weights/layer{i}/kernel" for i in range(4)]
SIDES = ("floor", "floor-once", "ours", "ours-serial", "smdebug", "floor-reopen")
FLOORS = ("floor", "floor-once", "floor-reopen")


def write_trial(path: str, steps: int) -> None:
    """Write the trial with smdebug's own writer (run under the smdebug venv), under
    ``<path>.partial`` renamed into place when complete."""
    import shutil

    import numpy as np
    from smdebug.core.collection_manager import CollectionManager
    from smdebug.core.modes import ModeKeys
    from smdebug.core.writer import FileWriter

    sys.path.insert(0, HERE)
    from make_trial import end_training

    partial = path + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(SIZE, dtype=np.float32) for _ in WEIGHTS]
    for step in range(steps):
        tensors: dict[str, object] = {"loss": np.array(1 / (step + 1), np.float32)}
        for name in GRADIENTS:
            tensors[name] = rng.standard_normal(SIZE, dtype=np.float32) * np.float32(1e-3)
        for i, name in enumerate(WEIGHTS):
            weights[i] = weights[i] + rng.standard_normal(SIZE, dtype=np.float32) * 1e-4
            tensors[name] = weights[i]
        with FileWriter(trial_dir=partial, worker="worker_0", step=step) as fw:
            for name, value in tensors.items():
                fw.write_tensor(tdata=value, tname=name, mode=ModeKeys.TRAIN, mode_step=step)
    cm = CollectionManager()
    cm.add("default")
    for coll, names in (("gradients", GRADIENTS), ("weights", WEIGHTS), ("losses", ["loss"])):
        cm.add(coll)
        c = cm.get(coll)
        c.tensor_names = list(names)
    cm.export(partial, "worker_0_collections.json")
    end_training(partial)
    os.rename(partial, path)


class _Floor:
    """Values with no reader: index files parsed once, each value's event file read whole."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.where: dict[tuple[str, int], tuple[str, int, int]] = {}
        root = os.path.join(path, "index")
        for folder in os.scandir(root):
            for entry in os.scandir(folder.path):
                with open(entry.path, "rb") as f:
                    doc = json.loads(f.read())
                step = int(entry.name.split("_", 1)[0])
                event = doc["meta"]["event_file_name"]
                for t in doc["tensor_payload"]:
                    self.where[(t["tensorname"], step)] = (event, t["start_idx"], t["length"])
        self.steps = sorted({s for _, s in self.where})
        self.header = struct.Struct("<QI")
        self.markers: dict[int, bytes] = {}

    def value(self, name: str, step: int):
        import numpy as np

        event, start, length = self.where[(name, step)]
        with open(os.path.join(self.path, event), "rb") as f:
            f.seek(start)
            data = f.read(length)
        n, _ = self.header.unpack_from(data, 0)
        if n + 16 != length:
            raise SystemExit(f"bad record {event}:{start}")
        count = 1 if name == "loss" else SIZE
        marker = self.markers.get(count)
        if marker is None:  # TensorProto.tensor_content: field 4, length-delimited, 4 * count
            size, varint = 4 * count, bytearray()
            while True:
                varint.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
                size >>= 7
                if not size:
                    break
            marker = self.markers[count] = b"\x22" + bytes(varint)
        at = data.find(marker, 12, 12 + n) + len(marker)
        return np.frombuffer(data, np.float32, count, at)


def run_side(side: str, path: str) -> dict:
    import numpy as np

    if side in ("floor", "floor-once"):
        sys.path.insert(0, HERE)
        from large_floor import run_floor

        phases, numbers = run_floor(path, SIZE, GRADIENTS, WEIGHTS, once=side == "floor-once")
        return _result(side, phases, numbers)
    start = time.perf_counter()
    if side == "smdebug":
        from smdebug.trials import create_trial as smdebug_trial

        trial = smdebug_trial(path)
        steps = trial.steps()
    elif side in ("ours", "ours-serial"):
        sys.path.insert(0, REPO)
        from evaluator.trial import create_trial

        options = {"prefetch_steps": 0} if side == "ours-serial" else {}
        trial = create_trial(path, **options)
        steps = trial.steps()
    if side == "floor-reopen":
        floor = _Floor(path)
        steps = floor.steps
        value = floor.value
        probe = floor.value(GRADIENTS[0], steps[0])
        assert probe.shape == (SIZE,)
    else:

        def value(name: str, step: int):
            return trial.tensor(name).value(step)

    opened = time.perf_counter() - start
    numbers: list[float] = []
    phases = {"open": opened}

    t = time.perf_counter()
    for step in steps:
        for name in GRADIENTS:
            numbers.append(float(np.mean(np.abs(value(name, step)))))
    phases["VanishingGradient"] = time.perf_counter() - t
    t = time.perf_counter()
    for step in steps:
        for name in [*GRADIENTS, *WEIGHTS, "loss"]:
            v = value(name, step)
            numbers.append(float(bool(np.isnan(v).any() or np.isinf(v).any())))
    phases["ExplodingTensor"] = time.perf_counter() - t
    t = time.perf_counter()
    previous: dict[str, object] = {}
    for step in steps[1:]:
        for name in WEIGHTS:
            # a reader reads both steps through the API, as the rule does; the floor reads
            # each value once and keeps the previous step's
            before = previous.get(name) if side == "floor-reopen" else value(name, step - 1)
            if before is None:
                before = value(name, step - 1)
            now = value(name, step)
            previous[name] = now
            numbers.append(float(np.linalg.norm(now - before) / np.linalg.norm(before)))
    phases["WeightUpdateRatio"] = time.perf_counter() - t
    phases["rules"] = sum(v for k, v in phases.items() if k != "open")
    return _result(side, phases, numbers)


def _result(side: str, phases: dict, numbers: list[float]) -> dict:
    cpu = time.process_time()
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    return {
        "side": side,
        "phases": {k: round(v, 3) for k, v in phases.items()},
        "cpu_s": round(cpu, 2),
        "checksum": hash(tuple(round(x, 6) for x in numbers)),
        "numbers": len(numbers),
        "peak_rss_mib": round(peak, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES), help="comma list of %(default)s")
    parser.add_argument("--side", choices=SIDES)
    parser.add_argument("--trial")
    parser.add_argument("--write", action="store_true", help="write --trial (smdebug venv)")
    args = parser.parse_args()
    if args.write:
        write_trial(args.trial, args.steps)
        return 0
    if args.side:
        print(json.dumps(run_side(args.side, args.trial)))
        return 0
    sides = [s for s in args.sides.split(",") if s]
    path = os.path.join(HERE, ".work", "large_tensors", f"smdebug_{args.steps}")
    if not os.path.exists(os.path.join(path, "training_job_end.ts")):
        subprocess.run(["bash", os.path.join(HERE, "setup_smdebug.sh")], check=True)
        print(f"writing {path} with smdebug's writer", file=sys.stderr)
        subprocess.run(
            [SMDEBUG_PY, __file__, "--write", "--trial", path, "--steps", str(args.steps)],
            check=True,
        )
    for name in os.listdir(os.path.join(path, "events")):  # warm the page cache
        for file in os.scandir(os.path.join(path, "events", name)):
            with open(file.path, "rb") as f:
                while f.read(1 << 24):
                    pass
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    env = dict(os.environ, PYTHONHASHSEED="0")
    load_before = os.getloadavg()
    for _ in range(args.repeat):
        for side in sides:
            python = SMDEBUG_PY if side == "smdebug" else sys.executable
            done = subprocess.run(
                [python, __file__, "--side", side, "--trial", path],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            runs[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(side, json.dumps(runs[side][-1]["phases"]), file=sys.stderr)
    checks = {r["checksum"] for side in runs.values() for r in side}
    out: dict = {
        "steps": args.steps,
        "repeat": args.repeat,
        "load": [load_before, os.getloadavg()],
        "nproc": os.cpu_count(),
        "same": len(checks) == 1,
        "sides": sides,
    }
    for side, rs in runs.items():
        out[side] = {
            k: round(statistics.median(r["phases"][k] for r in rs), 3) for k in rs[0]["phases"]
        }
        out[side]["peak_rss_mib"] = max(r["peak_rss_mib"] for r in rs)
        out[side]["cpu_s"] = round(statistics.median(r["cpu_s"] for r in rs), 2)
        out[side]["runs"] = [r["phases"]["rules"] for r in rs]
    for floor in FLOORS:
        if floor in out:
            for side in sides:
                if side not in FLOORS:
                    key = "ratio_" + side if floor == "floor" else f"ratio_{side}_{floor}"
                    out[key] = round(out[side]["rules"] / out[floor]["rules"], 2)
    if "ours" in out and "floor" in out:
        out["ratio_ours_cpu"] = round(out["ours"]["cpu_s"] / out["floor"]["cpu_s"], 2)
    print(json.dumps(out, indent=1))
    sys.path.insert(0, HERE)
    from scale_report import store

    store("large_tensors", out)
    return 0 if out["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
