"""One benchmark workload, run against either trial reader through the same Trial API.

    bench/.work/venv-smdebug/bin/python bench/workloads.py --impl smdebug --trial T --workload W
    .venv/bin/python                    bench/workloads.py --impl ours    --trial T --workload W

``--impl smdebug`` imports ``smdebug.trials.create_trial`` (the real smdebug 1.0.34, from its own
venv); ``--impl ours`` imports ``evaluator.trial.create_trial`` from this checkout.  Everything
else is the same code.  ``T`` is a local trial directory or ``s3://bucket/prefix`` (for a moto
server, set ``AWS_ENDPOINT_URL`` and dummy credentials; bench/run.py --s3 does).

Workloads (the fresh process does exactly this, nothing else):

``metadata``
    create_trial, steps(), modes(), tensor_names(), workers().  Headline: the sum of those.
``values100``
    create_trial, steps() + tensor_names() ("list"), then 100 ``tensor(name).value(step)``
    reads: read i (0..99) takes step ``steps[i * len(steps) // 100]`` and tensor
    ``names[(i * 17) % len(names)]``.  Each read is timed alone, then its value is hashed
    (timed apart).  Headline: the 100 reads; create_trial is reported too.
``values_all``
    create_trial, list, then every tensor at every step (step-major, names in sorted order),
    twice: 2 x steps x tensors ``value()`` calls (200,000 on the 2000x50 trial).  Per step, the
    reads of its values are timed as one block into a list, then the list is hashed (timed
    apart); only one step's values are held at a time.  Headline: all reads; each pass (its
    reads only) is reported too.

The floors: what the same answers cost with no reader at all, only the bytes and the framing,
in a plain loop (stdlib, numpy and, when installed, orjson; ``--impl`` only picks the
interpreter).  A reader cannot beat them; the issue's target is "within 2x".

``floor_metadata``
    list ``index/`` (``os.scandir`` of its folders), read and parse every index file (orjson,
    else json), and collect the steps and the sorted tensor names.  Headline: all of it.
``floor_values``
    the index files are read and parsed first (``index`` phase, not in the headline); then the
    values_all walk, twice: per step (in order), one read of its event file, and per tensor
    (names sorted) the record framed (length, length CRC, footer checked) and one
    ``numpy.frombuffer`` over its payload.  The CRC of each distinct length is computed once,
    as a reader would cache it.  Headline: both passes; they compare directly with
    values_all's ``reads`` (and a pass with its ``pass1``/``pass2``): neither contains any
    hashing.  Its checksum (a CRC chain over the payloads, computed after the timing) does
    not equal values_all's, which hashes the decoded values.

Both floors run with the cyclic garbage collector paused, as our reader pauses it while it
loads index files.

Output: ONE JSON line on stdout (the last line; libraries may log before it) with the seconds of
each phase (``phases``), the headline seconds, the total (``total_s``: everything after the
import except the checksum, which is timed apart; for the value workloads create_trial + list +
reads), the peak RSS of the process (``ru_maxrss``), a checksum of every value read (CRC-32
chained over the raw bytes in read order, plus the dtypes/shapes seen) and a checksum of the
metadata answers, so that a runner can prove both implementations read the same numbers.  The
value workloads hash each value after its read, outside the timed reads, and time the hashing
apart: phase ``checksum_s`` (about the same for both implementations), in neither ``reads``
nor the total.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from checksums import Checksum, meta_checksum, mode_name
from floor import run_floor
from process_info import env_info, now, peak_rss_mib, project_version, rss_mib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
WORKLOADS = ("metadata", "values100", "values_all")
FLOOR_WORKLOADS = ("floor_metadata", "floor_values")
S3_WORKLOADS = ("metadata", "values100")


def load_impl(impl: str):
    """Import create_trial of the chosen implementation; return (create_trial, version info)."""
    info: dict = {}
    if impl == "smdebug":
        import smdebug
        from smdebug.trials import create_trial

        info["impl_version"] = getattr(smdebug, "__version__", "?")
        info["impl_file"] = os.path.dirname(smdebug.__file__)
        if info["impl_version"] != "1.0.34":
            print(
                f"warning: smdebug {info['impl_version']} imported, the anchor is 1.0.34",
                file=sys.stderr,
            )
    elif impl == "ours":
        if REPO_ROOT not in sys.path:
            sys.path.insert(0, REPO_ROOT)
        import evaluator
        from evaluator.trial import create_trial

        info["impl_version"] = getattr(evaluator, "__version__", None) or project_version()
        info["impl_file"] = os.path.dirname(evaluator.__file__)
    else:
        raise SystemExit(f"unknown --impl {impl!r}")
    return create_trial, info


def run(impl: str, trial_path: str, workload: str) -> dict:
    if workload not in WORKLOADS:
        raise SystemExit(f"unknown --workload {workload!r} (one of {', '.join(WORKLOADS)})")
    phases: dict[str, float] = {}
    t = now()
    create_trial, impl_info = load_impl(impl)
    phases["import"] = now() - t
    rss_after_import = rss_mib()
    out: dict = {
        "impl": impl,
        "workload": workload,
        "trial": trial_path,
        "storage": "s3" if trial_path.startswith("s3://") else "local",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }

    t = now()
    trial = create_trial(trial_path)
    phases["create_trial"] = now() - t
    check = Checksum()

    if workload == "metadata":
        t = now()
        steps = trial.steps()
        phases["steps"] = now() - t
        t = now()
        modes = list(trial.modes())
        phases["modes"] = now() - t
        t = now()
        names = trial.tensor_names()
        phases["tensor_names"] = now() - t
        t = now()
        workers = list(trial.workers())
        phases["workers"] = now() - t
        headline = sum(
            phases[k] for k in ("create_trial", "steps", "modes", "tensor_names", "workers")
        )
        out["meta_checksum"] = meta_checksum(steps, names, modes, workers)
        out["modes"] = sorted(mode_name(m) for m in modes)
        out["workers"] = workers
        out["checksum"] = out["meta_checksum"]
    else:
        t = now()
        steps = trial.steps()
        names = trial.tensor_names()
        phases["list"] = now() - t
        out["meta_checksum"] = meta_checksum(steps, names)
        if not steps or not names:
            raise SystemExit(f"trial {trial_path} has {len(steps)} steps, {len(names)} tensors")
        if workload == "values100":
            plan = [
                (steps[i * len(steps) // 100], names[(i * 17) % len(names)]) for i in range(100)
            ]
            reads = hashing = 0.0
            for step, name in plan:
                t = now()
                value = trial.tensor(name).value(step)
                t1 = now()
                check.add(value)
                hashing += now() - t1
                reads += t1 - t
            phases["reads"] = reads
        else:  # values_all
            hashing = 0.0
            for p in (1, 2):
                reads = 0.0
                for step in steps:
                    t = now()
                    values = [trial.tensor(name).value(step) for name in names]
                    t1 = now()
                    for value in values:
                        check.add(value)
                    hashing += now() - t1
                    reads += t1 - t
                phases[f"pass{p}"] = reads
            phases["reads"] = phases["pass1"] + phases["pass2"]
        headline = phases["reads"]
        out["checksum"] = check.digest()
        phases["checksum_s"] = hashing

    out["n_steps"] = len(steps)
    out["n_tensors"] = len(names)
    out["values_read"] = check.n
    out["phases"] = {k: round(v, 4) for k, v in phases.items()}
    out["seconds"] = round(headline, 4)
    # Everything after the import except the checksum, which is timed apart (pass1/pass2 are
    # parts of "reads").
    not_in_total = ("import", "checksum_s", "pass1", "pass2")
    out["total_s"] = round(sum(v for k, v in phases.items() if k not in not_in_total), 4)
    out["peak_rss_mib"] = peak_rss_mib()
    out["rss_after_import_mib"] = rss_after_import
    out["env"] = dict(env_info(), impl=impl, **impl_info, executable=sys.executable)
    return out


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTEST_CURRENT_TEST"):
        print(
            "bench/workloads.py is a benchmark; it is never run or timed inside the test suite",
            file=sys.stderr,
        )
        return 2
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--impl", required=True, choices=("smdebug", "ours"))
    p.add_argument("--trial", required=True, help="local trial directory or s3://bucket/prefix")
    p.add_argument("--workload", required=True, choices=WORKLOADS + FLOOR_WORKLOADS)
    args = p.parse_args(argv)
    trial = args.trial.strip()
    if not trial.startswith("s3://"):
        trial = os.path.abspath(trial)
        if not os.path.isdir(trial):
            raise SystemExit(f"no trial directory {trial}")
    if args.workload in FLOOR_WORKLOADS:
        if trial.startswith("s3://"):
            raise SystemExit("the floor workloads read a local trial")
        result = run_floor(trial, args.workload)
    else:
        result = run(args.impl, trial, args.workload)
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
