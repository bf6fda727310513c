"""What every part of the benchmark runner shares: the paths (bench/, the repository, the
smdebug venv, results.json, RESULTS.md), the workload names and sides, the headline and phase
labels of the report, and ``rel`` / ``log`` / ``now_iso``."""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time

from workloads import FLOOR_WORKLOADS, WORKLOADS

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/
REPO = os.path.dirname(HERE)

# bench/rules_workload.py: the built-in rules over the trial. Not in the default set (a run of
# smdebug's side takes minutes): --workloads rules, or --workloads all.
RULES_WORKLOAD = "rules"
# The same, on the rules trial (make_trial.py --kind mixed, bench/mixed_trial.py): losses,
# TRAIN/EVAL steps, labels, activations and XGBoost-style tensors, so that every built-in rule
# has something to read. Also not in the default set: --workloads rules_mixed, or all.
RULES_MIXED_WORKLOAD = "rules_mixed"
RULES_WORKLOADS = (RULES_WORKLOAD, RULES_MIXED_WORKLOAD)
LOCAL_WORKLOADS = WORKLOADS + RULES_WORKLOADS

WORK = os.path.join(HERE, ".work")
SMDEBUG_PY = os.path.join(WORK, "venv-smdebug", "bin", "python")
OURS_PY_DEFAULT = os.path.join(REPO, ".venv", "bin", "python")
MOTO_SERVER_DEFAULT = os.path.join(REPO, ".venv", "bin", "moto_server")
RESULTS_JSON = os.path.join(HERE, "results.json")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
SCALE_MD = os.path.join(HERE, "results_scale.md")  # bench/scale_report.py writes it
IMPLS = ("smdebug", "ours")
# The floors (bench/workloads.py, README "Floors"): what the same answers cost with no reader at
# all.  A local metadata or values_all run also runs its floor, as a third side named "floor"
# (ours' yardstick: it runs whenever ours runs, under ours' interpreter), stored under
# local/<workload>/floor.
FLOOR = "floor"
FLOOR_OF = {"metadata": "floor_metadata", "values_all": "floor_values"}
assert set(FLOOR_OF.values()) <= set(FLOOR_WORKLOADS)
S3_BUCKET = "bench-trials"
TARGET_SPEEDUP = 10.0
# What the summary's seconds are: everything the process does after the import (total_s),
# except the value workloads' checksum, which is timed apart (checksum_s); for the value
# workloads also the reads alone, on a row of their own.
HEADLINE = {
    "metadata": "create_trial + steps() + modes() + tensor_names() + workers()",
    "values100": "create_trial + steps()/tensor_names() + 100 value() reads (the checksum of the "
    "values is timed apart, not in it); the reads alone on their own row",
    "values_all": "create_trial + steps()/tensor_names() + every tensor at every step, twice "
    "(2 x steps x tensors value() calls; the checksum of the values is timed apart, not in it); "
    "the reads alone on their own row",
    "rules": "create_trial + every rule both sides ran (build + invoke_rule over all steps)",
    "rules_mixed": "the same on the rules trial (bench/mixed_trial.py)",
}
# Phases shown in the per-workload tables, in order.
PHASES = {
    "metadata": ["import", "create_trial", "steps", "modes", "tensor_names", "workers"],
    "values100": ["import", "create_trial", "list", "reads", "checksum_s"],
    "values_all": [
        "import",
        "create_trial",
        "list",
        "pass1",
        "pass2",
        "reads",
        "checksum_s",
    ],
}


def rel(path: str) -> str:
    try:
        r = os.path.relpath(path, REPO)
    except ValueError:
        return path
    return path if r.startswith("..") else r


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
