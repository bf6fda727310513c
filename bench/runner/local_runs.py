"""The offline workloads (``--workloads``, local or ``--s3``): every side of every workload run
``--repeat`` times in fresh processes, alternating the sides, stored per side in results.json,
then RESULTS.md written (the floors run as a third side with ours; ``--s3`` adds the request
counts)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

import make_trial

from runner.common import (
    FLOOR,
    FLOOR_OF,
    HERE,
    RULES_MIXED_WORKLOAD,
    S3_BUCKET,
    SMDEBUG_PY,
    log,
    now_iso,
    rel,
)
from runner.moto import MotoServer
from runner.prepare import (
    ensure_mixed_trial,
    ensure_smdebug_venv,
    ensure_trial,
    probe_ours,
    warm_page_cache,
)
from runner.report import write_report
from runner.results import entry_key, save_results
from runner.s3_counts import count_requests
from runner.sides import git_state, run_one, summarize


def run_workloads(
    args: argparse.Namespace,
    data: dict[str, Any],
    impls: list[str],
    workloads: list[str],
    command: str,
) -> int:
    """Run ``workloads`` for ``impls`` as ``args`` say, store the figures in ``data`` (and
    results.json) and write RESULTS.md; the exit status."""
    storage = "s3" if args.s3 else "local"
    trial = os.path.abspath(args.trial)

    failures: list[str] = []
    if "ours" in impls:
        reason = probe_ours(args.ours_python)
        if reason:
            log(
                f"skipping ours: `from evaluator.trial import create_trial` fails under "
                f"{rel(args.ours_python)}: {reason}"
            )
            impls.remove("ours")
            data["ours_unavailable"] = {"reason": reason, "at": now_iso()}
        else:
            data.pop("ours_unavailable", None)
    if not impls:
        log("nothing to run; stored figures left as they are")
        write_report(data, args.report, args.results)
        return 0
    if "smdebug" in impls:
        ensure_smdebug_venv()
    manifest = ensure_trial(trial)
    data["trial"] = dict(manifest, path=rel(trial))
    params = {k: manifest[k] for k in ("steps", "tensors", "size", "seed")}
    mixed_trial = os.path.abspath(make_trial.MIXED_OUT)
    mixed_params: dict[str, Any] = {}
    if RULES_MIXED_WORKLOAD in workloads:
        mm = ensure_mixed_trial(mixed_trial)
        data.setdefault("trials", {})["mixed"] = dict(mm, path=rel(mixed_trial))
        mixed_params = {k: mm[k] for k in ("kind", "steps", "seed", "eval_every")}

    pythons = {"smdebug": SMDEBUG_PY, "ours": args.ours_python}
    git = git_state()
    run_id = now_iso()  # entries written by this invocation share it

    moto = MotoServer(args.moto_server) if args.s3 else None
    try:
        env = None
        target = trial
        if moto:
            moto.__enter__()
            env = moto.env()
            target = _upload(args, trial, env)
        else:
            if any(w != RULES_MIXED_WORKLOAD for w in workloads):
                warm_page_cache(trial)
            if RULES_MIXED_WORKLOAD in workloads:
                warm_page_cache(mixed_trial)

        def counts(moto: MotoServer, workload: str) -> None:
            count_requests(
                data, impls, pythons, target, workload, moto, args, command, run_id, git, failures
            )

        for workload in workloads:
            if moto and not args.no_requests and args.requests_only:
                counts(moto, workload)
                continue
            # The floor is ours' yardstick: a third side whenever ours runs a local workload
            # that has one (same loop, same repeats, ours' interpreter).
            sides = list(impls)
            if not moto and "ours" in impls and workload in FLOOR_OF:
                sides.append(FLOOR)
            on = mixed_trial if workload == RULES_MIXED_WORKLOAD else target
            runs = _timed_runs(args, storage, workload, sides, pythons, on, env)
            for impl in sides:
                figures = _figures(runs[impl])
                entry = {
                    "impl": impl,
                    "storage": storage,
                    "workload": workload,
                    **({"floor_workload": FLOOR_OF[workload]} if impl == FLOOR else {}),
                    "measured_at": now_iso(),
                    "run_id": run_id,
                    "command": command,
                    "trial": target if moto else rel(on),
                    "env": figures["env"],
                    "git": git if impl in ("ours", FLOOR) else None,
                    "trial_params": mixed_params if workload == RULES_MIXED_WORKLOAD else params,
                    "runs": figures["runs"],
                    "summary": figures["summary"],
                }
                if "error" in figures:
                    entry["error"] = figures["error"]
                    failures.append(
                        f"{storage}/{workload}/{impl}: {entry['error'].splitlines()[0]}"
                    )
                data["entries"][entry_key(storage, workload, impl)] = entry
            save_results(args.results, data)
            if moto and not args.no_requests:
                counts(moto, workload)
    finally:
        if moto:
            moto.__exit__(None, None, None)

    save_results(args.results, data)
    problems = write_report(data, args.report, args.results)
    log(f"wrote {rel(args.results)} and {rel(args.report)}")
    for f in failures + problems:
        log(f"PROBLEM: {f}")
    return 1 if failures or problems else 0


def _upload(args: argparse.Namespace, trial: str, env: dict[str, Any]) -> str:
    """Upload the local trial to the moto server; its s3:// URI."""
    prefix = os.path.basename(trial.rstrip("/"))
    log(f"uploading the trial to s3://{S3_BUCKET}/{prefix}")
    up = [
        args.ours_python if os.path.exists(args.ours_python) else sys.executable,
        os.path.join(HERE, "s3_upload.py"),
        "--src",
        trial,
        "--bucket",
        S3_BUCKET,
        "--prefix",
        prefix,
    ]
    subprocess.run(up, check=True, env=env, stdout=sys.stderr)
    return f"s3://{S3_BUCKET}/{prefix}"


def _timed_runs(
    args: argparse.Namespace,
    storage: str,
    workload: str,
    sides: list[str],
    pythons: dict[str, Any],
    on: str,
    env: dict[str, Any] | None,
) -> dict[str, list[dict[str, Any]]]:
    """``args.repeat`` fresh-process runs of ``workload`` per side, the sides alternating."""
    runs: dict[str, list[dict[str, Any]]] = {i: [] for i in sides}
    for rep in range(args.repeat):
        for impl in sides:  # alternate the sides so that drift hits them alike
            log(f"{storage} {workload} {impl} run {rep + 1}/{args.repeat}")
            if impl == FLOOR:
                r = run_one(args.ours_python, "ours", on, FLOOR_OF[workload], env, args.timeout)
            else:
                r = run_one(pythons[impl], impl, on, workload, env, args.timeout)
            if "error" in r:
                log(f"  FAILED: {r['error']}")
            elif impl == FLOOR:  # its headline: index + names, or both passes
                log(
                    f"  {FLOOR_OF[workload]} {r['seconds']:.3f} s, "
                    f"peak {r['peak_rss_mib']:.0f} MiB, {r['checksum'][:40]}"
                )
            else:
                reads = r["phases"].get("reads")
                log(
                    f"  total {r['total_s']:.3f} s"
                    + (f" (reads {reads:.3f} s)" if reads is not None else "")
                    + f", peak {r['peak_rss_mib']:.0f} MiB, {r['checksum'][:40]}"
                )
            runs[impl].append(r)
    return runs


def _figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A side's stored figures: the environment of its first good run, every run without its
    environment, their summary, and the first error when a run failed."""
    ok = [r for r in runs if "error" not in r]
    figures = {
        "env": ok[0]["env"] if ok else None,
        "runs": [{k: v for k, v in r.items() if k != "env"} for r in runs],
        "summary": summarize(runs),
    }
    if len(ok) < len(runs):
        figures["error"] = next(r["error"] for r in runs if "error" in r)
    return figures
