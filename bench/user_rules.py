"""User-style rules through ``smdebug.rules.invoke_rule``: smdebug 1.0.34 against ours, and ours
with the report's recording of what a rule reads on and off, in one run (issue 42).

    .venv/bin/python bench/user_rules.py                       # every side, 3 runs each
    .venv/bin/python bench/user_rules.py --repeat 5 --sides ours,ours-off
    .venv/bin/python bench/user_rules.py --child --trial T     # one side's process (prints JSON)

The script a user runs (``bench/user_rule_bodies.py``: VanishingGradient, ExplodingTensor,
AllZero, WeightUpdateRatio, LossNotDecreasing written against smdebug's names only) is the same
on every side; what answers ``import smdebug`` differs:

* ``smdebug``: the real smdebug 1.0.34 (bench/.work/venv-smdebug); its ``invoke_rule`` ends
  with ``NoMoreData``, caught;
* ``ours``: ``.venv``, where ``smdebug`` is our package's import names (evaluator/compat/shim),
  every rule charting what it reads for its report (``Evidence.watch_reads``), as it does when
  the evaluator runs it;
* ``ours-off``: the same with ``Evidence.watch_reads`` made a no-op before the rules are built:
  no series of what the rule reads (the reads are still counted, which a verdict needs).

Each side is a fresh process on ``bench/.work/trials/big_2000x50x256`` (bench/make_trial.py);
the figure is the process's **wall time, imports included**, as a user runs it, measured by
the parent around the process, and its CPU (user + system, from the parent's
``RUSAGE_CHILDREN``); medians. Every side must fire at the same steps (a checksum of the fired
steps and the counts of steps evaluated).

Two phases, so that a side's figure does not depend on the process that ran before it (on
this VM a process that follows smdebug's minute of CPU runs 10 to 25 % slower than one that
follows a 4-second process. With the three sides in one alternation, the middle side ran
after smdebug two times in three: the same tree gave on / off 1.14 with ``ours`` in the
middle and 0.98 with ``ours-off`` there):

* the speed-up: smdebug and ``ours`` alternate, in the reverse order every other repetition;
* the read charts' cost (when ``ours-off`` is a side): after one run that is not counted (the
  machine settles after smdebug's), ``ours-on`` and ``ours-off`` (the same process with the
  charts on and off) alternate A B B A, as many repetitions, one process right after the
  other; on / off is of these two;
* the same cost measured closer (``--side-by-side N``, by default as many pairs as
  repetitions, when ``ours-off`` is a side): the two processes started together, each pinned
  to a core of its own (one BLAS thread each, so neither spills onto the other's core); both
  see the same state of the machine, and the pairs' ratios of the rule bodies' CPU spread
  about +-2 %, where processes run one after the other spread +-10 % (the charts on on both
  sides, 6 pairs: 0.999). Stored as ``recording_side_by_side``.

Stored in ``bench/results_scale.json`` under ``user_rules`` and rendered into RESULTS.md by
``bench/scale_report.py``. Never run from the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SMDEBUG_PY = os.path.join(HERE, ".work", "venv-smdebug", "bin", "python")
OURS_PY = os.path.join(os.path.dirname(HERE), ".venv", "bin", "python")
TRIAL = os.path.join(HERE, ".work", "trials", "big_2000x50x256")
SIDES = ("smdebug", "ours", "ours-off")
PAIRED = ("ours-on", "ours-off")  # the read charts on and off, in a phase of their own


def child(trial_path: str, recording: bool, only: list[str] | None) -> dict:
    """One side's process: import, open the trial, run every rule; what it saw."""
    started = time.perf_counter()
    if not recording:
        from evaluator.rules.evidence import Evidence

        Evidence.watch_reads = lambda self: None  # type: ignore[method-assign]
    import smdebug
    from smdebug.exceptions import NoMoreData
    from smdebug.rules import invoke_rule
    from smdebug.trials import create_trial

    sys.path.insert(0, HERE)
    import user_rule_bodies

    imported = time.perf_counter() - started
    trial = create_trial(trial_path)
    rules: dict[str, dict] = {}
    for cls in user_rule_bodies.RULES:
        if only and cls.__name__ not in only:
            continue
        cpu, wall = time.process_time(), time.perf_counter()
        rule = cls(trial)
        try:
            invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=False)
        except NoMoreData:
            pass  # smdebug's end of the data
        rules[cls.__name__] = {
            "cpu_s": round(time.process_time() - cpu, 3),
            "wall_s": round(time.perf_counter() - wall, 3),
            "evaluated": rule.evaluated,
            "fired": len(rule.fired),
            "fired_hash": hashlib.sha1(repr(rule.fired).encode()).hexdigest()[:12],
        }
    answer = repr(sorted((k, v["evaluated"], v["fired_hash"]) for k, v in rules.items()))
    return {
        "smdebug_file": smdebug.__file__,
        "import_s": round(imported, 3),
        "rules": rules,
        "checksum": hashlib.sha1(answer.encode()).hexdigest()[:16],
        "cpu_s": round(time.process_time(), 3),
    }


def child_command(side: str, trial: str, only: str | None) -> list[str]:
    """The command of one side's process (``ours-on`` is ``ours``, named apart)."""
    python = SMDEBUG_PY if side == "smdebug" else OURS_PY
    command = [python, __file__, "--child", "--trial", trial]
    if side == "ours-off":
        command += ["--recording", "off"]
    if only:
        command += ["--only", only]
    return command


def run_side(side: str, trial: str, only: str | None) -> dict:
    command = child_command(side, trial, only)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["process_wall_s"] = round(wall, 3)
    figures["process_cpu_s"] = round(
        (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3
    )
    return figures


def summarise(runs: dict[str, list[dict]], args: argparse.Namespace, load: list) -> dict:
    out: dict = {"repeat": args.repeat, "sides": list(runs), "load": load}
    out["nproc"] = os.cpu_count()
    out["same"] = len({r["checksum"] for rs in runs.values() for r in rs}) == 1
    for side, rs in runs.items():
        names = list(rs[0]["rules"])
        out[side] = {
            "wall_s": round(statistics.median(r["process_wall_s"] for r in rs), 2),
            "cpu_s": round(statistics.median(r["process_cpu_s"] for r in rs), 2),
            "import_s": round(statistics.median(r["import_s"] for r in rs), 2),
            "walls": [r["process_wall_s"] for r in rs],
            "cpus": [r["process_cpu_s"] for r in rs],
            "rules_cpu_s": {
                n: round(statistics.median(r["rules"][n]["cpu_s"] for r in rs), 3) for n in names
            },
            "fired": {n: rs[0]["rules"][n]["fired"] for n in names},
        }
    if "smdebug" in out and "ours" in out:
        out["speedup_wall"] = round(out["smdebug"]["wall_s"] / out["ours"]["wall_s"], 2)
        out["speedup_cpu"] = round(out["smdebug"]["cpu_s"] / out["ours"]["cpu_s"], 2)
    if "ours-on" in out and "ours-off" in out:
        on, off = out["ours-on"], out["ours-off"]
        out["recording_cost_cpu"] = round(on["cpu_s"] / off["cpu_s"], 3)
        out["recording_cost_wall"] = round(on["wall_s"] / off["wall_s"], 3)
        out.update(recording_detail(runs["ours-on"], runs["ours-off"]))
    return out


def recording_detail(on: list[dict], off: list[dict]) -> dict:
    """The recording's cost measured closer in: the median of each repetition's own on / off
    ratio (the two processes ran one after the other, under about the same load), and the
    rule bodies' CPU alone (``time.process_time()`` around each ``invoke_rule`` in the child,
    summed over the rules: no imports, no trial opening)."""
    pairs = list(zip(on, off))

    def paired(key: str) -> float:
        return round(statistics.median(a[key] / b[key] for a, b in pairs), 3)

    def rules_cpu(r: dict) -> float:
        return float(sum(rule["cpu_s"] for rule in r["rules"].values()))

    return {
        "recording_cost_cpu_paired": paired("process_cpu_s"),
        "recording_cost_wall_paired": paired("process_wall_s"),
        "recording_cost_rules_cpu": round(
            statistics.median(rules_cpu(r) for r in on)
            / statistics.median(rules_cpu(r) for r in off),
            3,
        ),
        "recording_cost_rules_cpu_paired": round(
            statistics.median(rules_cpu(a) / rules_cpu(b) for a, b in pairs), 3
        ),
    }


def side_by_side(args: argparse.Namespace) -> dict | None:
    """``args.side_by_side`` pairs of ours with the read charts on and off, the two processes
    at once, each pinned to its own core (the cores swap from pair to pair); None on a
    machine of one core."""
    if args.side_by_side < 1 or (os.cpu_count() or 1) < 2 or not hasattr(os, "sched_setaffinity"):
        return None
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    rules, process, checksums = [], [], set()
    for pair in range(args.side_by_side):
        started = {}
        for core, recording in enumerate(("on", "off") if pair % 2 == 0 else ("off", "on")):
            started[recording] = subprocess.Popen(
                child_command(f"ours-{recording}", args.trial, args.only),
                stdout=subprocess.PIPE,
                text=True,
                env=env,
                preexec_fn=lambda core=core: os.sched_setaffinity(0, {core}),
            )
        done = {}
        for recording, process_ in started.items():
            out, _ = process_.communicate()
            if process_.returncode:
                raise SystemExit(f"the side-by-side child ({recording}) failed")
            done[recording] = json.loads(out.strip().splitlines()[-1])
            checksums.add(done[recording]["checksum"])
        on, off = done["on"], done["off"]
        body = [sum(r["cpu_s"] for r in side["rules"].values()) for side in (on, off)]
        rules.append(round(body[0] / body[1], 3))
        process.append(round(on["cpu_s"] / off["cpu_s"], 3))
        print("side by side", rules[-1], process[-1], file=sys.stderr)
    return {
        "pairs": args.side_by_side,
        "rules_cpu": statistics.median(rules),
        "process_cpu": statistics.median(process),
        "rules_cpu_pairs": rules,
        "same": len(checksums) == 1,
    }


def alternate(sides: list[str], args: argparse.Namespace) -> dict[str, list[dict]]:
    """``args.repeat`` runs of each side, alternating, in the reverse order every other
    repetition (A B, B A, ...: a drift of the machine's speed weighs on every side alike)."""
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for repetition in range(args.repeat):
        for side in sides if repetition % 2 == 0 else sides[::-1]:
            runs[side].append(run_side(side, args.trial, args.only))
            r = runs[side][-1]
            print(side, r["process_wall_s"], r["process_cpu_s"], r["checksum"], file=sys.stderr)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES), help="comma list of %(default)s")
    parser.add_argument("--trial", default=TRIAL)
    parser.add_argument("--only", help="comma list of rule names (a development aid)")
    parser.add_argument("--no-store", action="store_true", help="print, keep results as they are")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--recording", choices=("on", "off"), default="on")
    parser.add_argument(
        "--side-by-side", type=int, help="pairs of the charts on and off run at once"
    )
    args = parser.parse_args()
    only = args.only.split(",") if args.only else None
    if args.child:
        print(json.dumps(child(args.trial, args.recording == "on", only)))
        return 0
    if "PYTEST_CURRENT_TEST" in os.environ:
        raise SystemExit("a benchmark, not a test")
    if not os.path.isdir(args.trial):
        raise SystemExit(f"no trial at {args.trial}: bench/run.py --workloads rules writes it")
    sides = [s for s in args.sides.split(",") if s]
    load = [os.getloadavg()]
    runs = alternate([s for s in sides if s != "ours-off"], args)
    pairs = None
    if "ours-off" in sides:
        run_side("ours", args.trial, args.only)  # not counted: the machine settles first
        runs.update(alternate(list(PAIRED), args))
        if args.side_by_side is None:
            args.side_by_side = args.repeat
        pairs = side_by_side(args)
    load.append(os.getloadavg())
    out = summarise(runs, args, load)
    if pairs is not None:
        out["recording_side_by_side"] = pairs
        out["same"] = out["same"] and pairs["same"]
    print(json.dumps(out, indent=1))
    if not args.no_store and not args.only:
        sys.path.insert(0, HERE)
        from scale_report import store

        store("user_rules", out)
    return 0 if out["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
