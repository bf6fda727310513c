"""S3 request counts (``--s3``): one extra run per workload and side through a counting proxy in
front of moto (bench/s3_requests.py), stored under ``requests`` in results.json."""

from __future__ import annotations

import argparse
from typing import Any

from runner.common import log, now_iso
from runner.moto import MotoServer
from runner.results import entry_key, save_results
from runner.sides import run_one


def run_counted(
    py: str,
    impl: str,
    target: str,
    workload: str,
    moto: MotoServer,
    timeout: float,
    keep_alive: bool = False,
) -> dict[str, Any]:
    """Run one workload with AWS_ENDPOINT_URL pointing at a fresh CountingProxy in front of moto."""
    from s3_requests import CountingProxy  # loads tests/support/faulty_proxy.py (stdlib only)

    with CountingProxy(moto.url, keep_alive=keep_alive) as proxy:
        env = dict(moto.env(), AWS_ENDPOINT_URL=proxy.endpoint)
        r = run_one(py, impl, target, workload, env, timeout)
        snap = proxy.snapshot()
    out: dict[str, Any] = {
        k: r[k]
        for k in (
            "total_s",
            "seconds",
            "checksum",
            "meta_checksum",
            "peak_rss_mib",
            "process_wall_s",
            "process_cpu_s",
        )
        if k in r
    }
    if "error" in r:
        out["error"] = r["error"]
    out.update(snap)
    out["keep_alive"] = keep_alive
    return out


def count_requests(
    data: dict[str, Any],
    impls: list[str],
    pythons: dict[str, Any],
    target: str,
    workload: str,
    moto: MotoServer,
    args: argparse.Namespace,
    command: str,
    run_id: str,
    git: dict[str, Any],
    failures: list[str],
) -> None:
    """One run per side through the counting proxy; stored under data["requests"]["s3/<workload>/<impl>"]."""
    for impl in impls:
        log(f"s3 {workload} {impl}: request count run (through the counting proxy)")
        r = run_counted(
            pythons[impl], impl, target, workload, moto, args.timeout, args.requests_keep_alive
        )
        if "error" in r:
            log(f"  FAILED: {r['error']}")
            failures.append(f"s3 requests/{workload}/{impl}: {r['error'].splitlines()[0]}")
        else:
            c = r["counts"]
            log("  " + ", ".join(f"{k} {c[k]}" for k in c))
        data.setdefault("requests", {})[entry_key("s3", workload, impl)] = dict(
            r,
            impl=impl,
            workload=workload,
            measured_at=now_iso(),
            run_id=run_id,
            command=command,
            trial=target,
            git=git if impl == "ours" else None,
        )
        save_results(args.results, data)
