"""Benchmark our trial reader against the real smdebug 1.0.34 on the same trial, in one run.

    .venv/bin/python bench/run.py                                   # both sides, local, 3 repeats
    .venv/bin/python bench/run.py --impl smdebug --workloads values_all
    .venv/bin/python bench/run.py --s3 --repeat 1                   # metadata+values100 via moto
    .venv/bin/python bench/run.py --workloads rules --repeat 1      # the built-in rules, both sides
    .venv/bin/python bench/run.py --workloads rules_mixed --repeat 1  # ... on the rules trial
    .venv/bin/python bench/run.py --report-only                     # rewrite RESULTS.md only

Steps: make sure bench/.work/venv-smdebug exists (bench/setup_smdebug.sh) and the trial exists
(bench/make_trial.py, written by smdebug itself); warm the page cache; run every workload
``--repeat`` times per implementation, each run in a fresh process (bench/workloads.py under
the matching interpreter), alternating the implementations; take medians; check that both
implementations (and every repeat) read the same values (checksums); store the raw figures in
bench/results.json (one entry per storage/workload/implementation; running one side replaces
only that side's entries) and write bench/RESULTS.md from it.  Local metadata and values_all
also run their floor (bench/workloads.py's floor_metadata / floor_values: no reader at all) as
a third side, "floor", in the same loop under ours' interpreter whenever ours runs; RESULTS.md
reports ours / floor next to smdebug / ours.

Exit status: 0, or 1 when a requested run failed or the checksums disagree.  ``--impl ours``
before evaluator.trial can be imported is reported and skipped (exit 0), leaving stored
figures alone.  Never run from the test suite.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

import make_trial
from s3_cpu_run import s3_cpu_main
from workloads import S3_WORKLOADS, WORKLOADS

from runner.common import (
    IMPLS,
    LOCAL_WORKLOADS,
    MOTO_SERVER_DEFAULT,
    OURS_PY_DEFAULT,
    RESULTS_JSON,
    RESULTS_MD,
    SMDEBUG_PY,
    log,
    now_iso,
    rel,
)
from runner.live_runs import live_main
from runner.local_runs import run_workloads
from runner.moto import MotoServer
from runner.prepare import ensure_smdebug_venv, probe_ours
from runner.report import write_report
from runner.results import load_results, save_results
from runner.sides import git_state


def build_parser() -> argparse.ArgumentParser:
    """``bench/run.py``'s command line (its description is this module's docstring)."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--impl",
        choices=("both",) + IMPLS,
        default="both",
        help="run one side only; the other side's stored figures are kept (default: both)",
    )
    p.add_argument(
        "--workloads",
        default=None,
        help=f"comma list of {','.join(LOCAL_WORKLOADS)}, or all (default: {','.join(WORKLOADS)}; "
        f"with --s3: {','.join(S3_WORKLOADS)})",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="fresh-process runs per workload and side (default 3; with --live: 1)",
    )
    p.add_argument(
        "--s3",
        action="store_true",
        help="read the trial from S3 (a moto server on 127.0.0.1 started here) instead of the local folder",
    )
    p.add_argument(
        "--trial", default=make_trial.DEFAULT_OUT, help="local trial folder (default: %(default)s)"
    )
    p.add_argument(
        "--ours-python",
        default=OURS_PY_DEFAULT,
        help="interpreter for --impl ours (default: %(default)s)",
    )
    p.add_argument(
        "--moto-server",
        default=MOTO_SERVER_DEFAULT,
        help="moto_server executable (default: %(default)s)",
    )
    p.add_argument(
        "--timeout", type=float, default=1800, help="seconds allowed per workload process"
    )
    p.add_argument(
        "--results",
        default=RESULTS_JSON,
        help="raw figures, read and updated (default: %(default)s)",
    )
    p.add_argument("--report", default=RESULTS_MD, help="the report written (default: %(default)s)")
    p.add_argument(
        "--report-only", action="store_true", help="only rewrite the report from the stored figures"
    )
    g = p.add_argument_group("S3 request counts (with --s3)")
    g.add_argument(
        "--no-requests",
        action="store_true",
        help="skip the request-count runs (by default --s3 adds one run per workload and side "
        "through a counting proxy, after the timed runs)",
    )
    g.add_argument(
        "--requests-only",
        action="store_true",
        help="only the request-count runs; the stored timings are kept",
    )
    g.add_argument(
        "--requests-keep-alive",
        action="store_true",
        help="let the counting proxy keep client connections alive (moto closes each one; "
        "smdebug then reads wrong values, see bench/README.md)",
    )
    g = p.add_argument_group("S3 client CPU per request (--s3-cpu; bench/s3_cpu_run.py)")
    g.add_argument(
        "--s3-cpu",
        action="store_true",
        help="CPU per GET/LIST of every S3 client option (ours before and after, smdebug, "
        "obstore, awscrt, signing variants) against a moto server; runs on its own",
    )
    g.add_argument("--s3-cpu-impls", help="comma list of options (default: all)")
    g.add_argument("--s3-cpu-objects", type=int, default=1000, help="objects stored (%(default)s)")
    g.add_argument("--s3-cpu-gets", type=int, default=1000, help="GETs measured (%(default)s)")
    g.add_argument("--s3-cpu-lists", type=int, default=200, help="idle LISTs (%(default)s)")
    g.add_argument("--s3-cpu-pages", type=int, default=5, help="1000-key pages (%(default)s)")
    g = p.add_argument_group("live latency (--live)")
    g.add_argument(
        "--live",
        action="store_true",
        help="live latency instead of the offline workloads: a writer uploads steps to a moto server "
        "at a steady pace, the reader's wait_for_steps waits for each",
    )
    g.add_argument(
        "--live-steps", type=int, default=60, help="steps uploaded per run (default %(default)s)"
    )
    g.add_argument(
        "--live-pace", type=float, default=0.3, help="seconds between steps (default %(default)s)"
    )
    g.add_argument(
        "--live-poll",
        type=float,
        default=1.0,
        help="ours' poll_interval (default %(default)s); smdebug's is fixed at 2 s",
    )
    g.add_argument(
        "--live-tensors", type=int, default=4, help="tensors per step (default %(default)s)"
    )
    g.add_argument(
        "--live-size", type=int, default=256, help="float32 values per tensor (default %(default)s)"
    )
    g.add_argument(
        "--live-end-delay",
        type=float,
        default=5.0,
        help="seconds after the last step before training_job_end.ts (default %(default)s)",
    )
    g.add_argument(
        "--live-slack",
        type=float,
        default=60.0,
        help="seconds allowed beyond the upload time before a run is cut (default %(default)s)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run what the command line asks; the exit status (see the module docstring)."""
    if os.environ.get("PYTEST_CURRENT_TEST"):
        print(
            "bench/run.py is a benchmark; it is never run or timed inside the test suite",
            file=sys.stderr,
        )
        return 2
    p = build_parser()
    args = p.parse_args(argv)

    data = load_results(args.results)
    if args.report_only:
        problems = write_report(data, args.report, args.results)
        log(f"wrote {rel(args.report)}")
        return 1 if problems else 0

    if args.live:
        if args.s3 or args.workloads or args.requests_only:
            p.error("--live runs on its own (no --s3, --workloads or --requests-only)")
        if args.live_steps < 1 or args.live_pace < 0 or args.live_poll <= 0:
            p.error("--live-steps must be at least 1, --live-pace >= 0 and --live-poll > 0")
    if args.requests_only and (not args.s3 or args.no_requests):
        p.error("--requests-only needs --s3 (and not --no-requests)")
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat must be at least 1")
    impls = list(IMPLS) if args.impl == "both" else [args.impl]
    py_rel = rel(sys.executable) if os.path.exists(sys.executable) else "python3"
    command = shlex.join([py_rel, "bench/run.py", *(argv if argv is not None else sys.argv[1:])])
    if args.live:
        reason = probe_ours(args.ours_python)
        if reason:  # the writer is ours (evaluator.testing.TrialWriter), whichever side reads
            log(
                f"--live needs evaluator under {rel(args.ours_python)} for its writer: {reason}; nothing run"
            )
            return 0
        if "smdebug" in impls:
            ensure_smdebug_venv()
        return live_main(args, data, impls, command)
    if args.repeat is None:
        args.repeat = 3
    if args.s3_cpu:
        failed = s3_cpu_main(
            args,
            data,
            command,
            MotoServer(args.moto_server),
            ours_py=args.ours_python,
            smdebug_py=SMDEBUG_PY,
            ensure_smdebug_venv=ensure_smdebug_venv,
            git_state=git_state,
            now_iso=now_iso,
        )
        save_results(args.results, data)
        problems = write_report(data, args.report, args.results)
        log(f"wrote {rel(args.results)} and {rel(args.report)}")
        return 1 if failed or problems else 0

    allowed = S3_WORKLOADS if args.s3 else LOCAL_WORKLOADS
    default = S3_WORKLOADS if args.s3 else WORKLOADS
    if (args.workloads or "").strip() == "all":
        args.workloads = ",".join(allowed)
    workloads = [w.strip() for w in (args.workloads or ",".join(default)).split(",") if w.strip()]
    for w in workloads:
        if w not in allowed:
            p.error(
                f"workload {w!r} is not one of {', '.join(allowed)}" + (" (S3)" if args.s3 else "")
            )
    return run_workloads(args, data, impls, workloads, command)
