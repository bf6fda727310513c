"""Running one side: one workload of one implementation in a fresh process (bench/workloads.py or
bench/rules_workload.py under the side's interpreter), its medians, and the git state that
identifies the code measured."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import time
from typing import Any

from runner.common import HERE, REPO, RULES_WORKLOADS


def workload_cmd(py: str, impl: str, trial: str, workload: str) -> list[str]:
    if workload in RULES_WORKLOADS:
        return [py, os.path.join(HERE, "rules_workload.py"), "--impl", impl, "--trial", trial]
    return [
        py,
        os.path.join(HERE, "workloads.py"),
        "--impl",
        impl,
        "--trial",
        trial,
        "--workload",
        workload,
    ]


def run_one(
    py: str, impl: str, trial: str, workload: str, env: dict[str, Any] | None, timeout: float
) -> dict[str, Any]:
    cmd = workload_cmd(py, impl, trial, workload)
    load_before = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = None
    for line in reversed(p.stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
    if p.returncode != 0 or not isinstance(result, dict) or "seconds" not in result:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-8:])
        return {"error": f"exit {p.returncode}: {tail}"}
    result["process_wall_s"] = round(wall, 3)
    # CPU time of the workload process (import included): wall >> cpu means the machine was busy
    # (the moto server's CPU is not in it).  Load averages: how busy the machine was.
    result["process_cpu_s"] = round(
        (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), 3
    )
    result["loadavg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


def median(xs: list[float | None]) -> float | None:
    found = [x for x in xs if x is not None]
    return round(statistics.median(found), 4) if found else None


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {}
    phases = sorted({k for r in ok for k in r["phases"]})
    return {
        "seconds": median([r["seconds"] for r in ok]),
        "total_s": median([r.get("total_s") for r in ok]),
        "peak_rss_mib": median([r["peak_rss_mib"] for r in ok]),
        "phases": {k: median([r["phases"].get(k) for r in ok]) for k in phases},
        "checksums": sorted({r["checksum"] for r in ok}),
        "meta_checksums": sorted({r["meta_checksum"] for r in ok}),
        "n_ok": len(ok),
    }


def git_state() -> dict[str, Any]:
    def git(*a: str) -> str | None:
        p = subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO)
        return p.stdout.strip() if p.returncode == 0 else None

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        # The results files themselves change between the runs of one session: not "dirty".
        "dirty": bool(
            git(
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!bench/results.json",
                ":!bench/RESULTS.md",
            )
        ),
    }
