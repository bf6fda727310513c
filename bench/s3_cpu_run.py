"""``run.py --s3-cpu``: process CPU per S3 request for every client option, in one run.

What it does:

1. makes sure of the two extra venvs: smdebug's (bench/setup_smdebug.sh) and the alternatives'
   (``bench/.work/venv-s3alt`` with bench/s3alt-requirements.txt: obstore, awscrt, and
   aiobotocore for the options that measured it);
2. starts moto_server on 127.0.0.1 and stores ``--s3-cpu-objects`` small objects (index-file
   sized, 300 bytes) in ``s3://bench-cpu/cpu/``;
3. starts a keep-alive forwarding proxy in its own process in front of moto (bench/s3_requests.py):
   moto closes every connection after one answer, real S3 keeps them open, and a client that
   reconnects for every request spends most of its CPU on connecting. Every option talks to the
   proxy; the proxy's and moto's CPU are their own processes' and never counted;
4. runs bench/s3_cpu.py once per option and repeat (alternating), each a fresh process, and keeps
   the median of each figure: milliseconds of process CPU (user + system, all threads, children
   included) per GET, per idle LIST and per 1000-key LIST page;
5. stores everything under ``s3_cpu`` in results.json; ``report_s3_cpu`` writes the section.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import s3_cpu

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORK = os.path.join(HERE, ".work")
ALT_VENV = os.path.join(WORK, "venv-s3alt")
ALT_PY = os.path.join(ALT_VENV, "bin", "python")
ALT_REQUIREMENTS = os.path.join(HERE, "s3alt-requirements.txt")
BUCKET = "bench-cpu"
PREFIX = "cpu/"
TARGET_MS = 0.5
PHASES = ("get", "list_idle", "list_page")
LABELS = {
    "smdebug": "smdebug 1.0.34 (`S3Handler`, boto3; a forked pool from 100 objects)",
    "aiobotocore": "**before**: aiobotocore (the S3Storage of issue 12 and earlier)",
    "botocore-signer": "aiohttp + botocore's `S3SigV4Auth` on an `AWSRequest`",
    "own-sigv4": "aiohttp + canonical request built here, signing key derived per request",
    "ours": "**ours**: `S3Storage` on obstore (retries, deadlines, translation, counts)",
    "obstore": "obstore 0.12 alone (Rust object_store)",
    "awscrt": "awscrt 0.38 (`awscrt.s3.S3Client`)",
}


def log(message: str) -> None:
    print(f"[s3-cpu] {message}", file=sys.stderr, flush=True)


def ensure_alt_venv() -> str | None:
    """The alternatives' venv, created when missing; None (with the reason logged) if pip fails."""
    stamp = os.path.join(ALT_VENV, ".bench-requirements")
    with open(ALT_REQUIREMENTS) as f:
        wanted = f.read()
    if os.path.exists(stamp) and open(stamp).read() == wanted:
        return ALT_PY
    try:
        if not os.path.exists(ALT_PY):
            subprocess.run([sys.executable, "-m", "venv", ALT_VENV], check=True)
        subprocess.run(
            [ALT_PY, "-m", "pip", "install", "--quiet", "-r", ALT_REQUIREMENTS], check=True
        )
    except subprocess.CalledProcessError as error:
        log(f"cannot create {ALT_VENV}: {error}; obstore and awscrt are not measured")
        return None
    with open(stamp, "w") as f:
        f.write(wanted)
    return ALT_PY


def store_objects(endpoint: str, env: dict[str, str], count: int) -> None:
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    client.create_bucket(Bucket=BUCKET)
    body = b'{"meta": {"mode": "TRAIN", "mode_step": 0}, "tensor_payload": [' + b"0, " * 80 + b"0]}"
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda key: client.put_object(Bucket=BUCKET, Key=key, Body=body),
                s3_cpu.keys(PREFIX, count),
            )
        )


def start_proxy(upstream: str, python: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [python, os.path.join(HERE, "s3_requests.py"), upstream, "--keep-alive"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    endpoint = proc.stdout.readline().strip()
    if not endpoint.startswith("http://"):
        proc.kill()
        raise SystemExit(f"the keep-alive proxy did not start (said {endpoint!r})")
    return proc, endpoint


def run_option(
    python: str, impl: str, env: dict[str, str], args: Any, timeout: float
) -> dict[str, Any]:
    cmd = [
        python,
        os.path.join(HERE, "s3_cpu.py"),
        "--impl",
        impl,
        "--bucket",
        BUCKET,
        "--prefix",
        PREFIX,
        "--objects",
        str(args.s3_cpu_objects),
        "--gets",
        str(args.s3_cpu_gets),
        "--lists",
        str(args.s3_cpu_lists),
        "--pages",
        str(args.s3_cpu_pages),
    ]
    load = os.getloadavg()[0]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"impl": impl, "error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        return {"impl": impl, "error": tail[:300]}
    result: dict[str, Any] = json.loads(lines[-1])
    result["loadavg_1min"] = [load, os.getloadavg()[0]]
    return result


def s3_cpu_main(
    args: Any,
    data: dict[str, Any],
    command: str,
    moto_server: Any,
    *,
    ours_py: str,
    smdebug_py: str,
    ensure_smdebug_venv: Callable[[], None],
    git_state: Callable[[], dict[str, Any]],
    now_iso: Callable[[], str],
) -> int:
    """Measure every option; store the figures in ``data['s3_cpu']``. 1 if an option failed."""
    pythons: dict[str, str | None] = {impl: ours_py for impl in s3_cpu.IMPLS}
    ensure_smdebug_venv()
    pythons["smdebug"] = smdebug_py
    alt = ensure_alt_venv()
    for impl in s3_cpu.ALT_IMPLS:
        pythons[impl] = alt
    wanted = [i for i in s3_cpu.IMPLS if not args.s3_cpu_impls or i in args.s3_cpu_impls.split(",")]
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in wanted}
    with moto_server as moto:
        env = moto.env()
        store_objects(moto.url, env, args.s3_cpu_objects)
        proxy, endpoint = start_proxy(moto.url, ours_py)
        try:
            env = {**env, "AWS_ENDPOINT_URL": endpoint}
            for repeat in range(args.repeat):
                for impl in wanted:
                    python = pythons[impl]
                    if python is None:
                        runs[impl].append({"impl": impl, "error": "venv not available"})
                        continue
                    result = run_option(python, impl, env, args, args.timeout)
                    runs[impl].append(result)
                    log(f"{impl} run {repeat + 1}: " + _brief(result))
        finally:
            if proxy.stdin is not None:
                proxy.stdin.close()
            proxy.wait(10)
    data["s3_cpu"] = {
        "measured_at": now_iso(),
        "command": command,
        "git": git_state(),
        "params": {
            "objects": args.s3_cpu_objects,
            "gets": args.s3_cpu_gets,
            "lists": args.s3_cpu_lists,
            "pages": args.s3_cpu_pages,
            "concurrency": s3_cpu.CONCURRENCY,
            "repeat": args.repeat,
        },
        "nproc": os.cpu_count(),
        "runs": runs,
        "medians": {impl: _medians(rs) for impl, rs in runs.items()},
    }
    return 1 if any("error" in r for rs in runs.values() for r in rs) else 0


def _brief(result: dict[str, Any]) -> str:
    if "error" in result:
        return f"error: {result['error']}"
    phases = result["phases"]
    return ", ".join(f"{p} {phases[p]['cpu_ms_per']:.3f} ms" for p in PHASES if p in phases)


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    good = [r for r in runs if "error" not in r]
    if not good:
        return {"error": runs[-1].get("error") if runs else "not run"}
    out: dict[str, Any] = {"runs": len(good)}
    for phase in PHASES:
        for figure in ("cpu_ms_per", "user_ms_per", "sys_ms_per", "wall_s"):
            out[f"{phase}.{figure}"] = statistics.median(r["phases"][phase][figure] for r in good)
    out["body_digest"] = sorted({r["body_digest"] for r in good})
    out["lists_ok"] = all(r["idle_empty"] and r["page_matches"] for r in good)
    loads = [x for r in good for x in r.get("loadavg_1min", [])]
    out["loadavg"] = [min(loads), max(loads)] if loads else None
    return out


def report_s3_cpu(lines: list[str], data: dict[str, Any], problems: list[str]) -> None:
    """The section "S3: client CPU per request" of RESULTS.md."""
    section = data.get("s3_cpu")
    if not section:
        return
    params = section["params"]
    medians = section["medians"]
    L = lines
    L.append("## S3: client CPU per request")
    L.append("")
    L.append(
        "Issue 13, item 1: process CPU per GET/LIST of the S3 client, at most "
        f"**{TARGET_MS} ms**. `bench/s3_cpu.py` per option, a fresh process each, against moto on "
        "127.0.0.1 through a keep-alive proxy in its own process (moto closes every connection; "
        "real S3 keeps them open). CPU = user + system time of the client process, all its threads "
        "and reaped children, from `getrusage`; imports, client creation and a warm-up excluded. "
        f"{params['gets']} GETs of {params['objects']} 300-byte objects ({params['concurrency']} at "
        f"a time), {params['lists']} idle LISTs (nothing after `start-after`: an idle poll), "
        f"{params['pages']} full 1000-key LIST pages. Medians of {params['repeat']} run(s), "
        "alternating the options."
    )
    L.append("")
    L.append(
        "| option | GET ms | idle LIST ms | 1000-key LIST page ms | GET user / sys ms "
        f"| GET ≤ {TARGET_MS} | idle LIST ≤ {TARGET_MS} | same bytes and keys |"
    )
    L.append("|---|---:|---:|---:|---|:-:|:-:|:-:|")
    digests = {tuple(m["body_digest"]) for m in medians.values() if "body_digest" in m}
    for impl in s3_cpu.IMPLS:
        m = medians.get(impl)
        if m is None:
            continue
        label = LABELS.get(impl, impl)
        if "error" in m:
            L.append(f"| {label} | – | – | – | – | – | – | not run: {m['error']} |")
            continue
        get, idle, page = (m[f"{p}.cpu_ms_per"] for p in PHASES)
        meets = " | ".join("yes" if x <= TARGET_MS else "NO" for x in (get, idle))
        same = "yes" if len(digests) == 1 and m["lists_ok"] else "NO"
        if same == "NO":
            problems.append(f"S3 CPU: {impl} read other bytes or listed other keys")
        L.append(
            f"| {label} | {get:.3f} | {idle:.3f} | {page:.1f} | "
            f"{m['get.user_ms_per']:.3f} / {m['get.sys_ms_per']:.3f} | {meets} | {same} |"
        )
    L.append("")
    before, after = medians.get("aiobotocore", {}), medians.get("ours", {})
    if "get.cpu_ms_per" in before and "get.cpu_ms_per" in after:
        L.append(
            f"- before → after: GET {before['get.cpu_ms_per']:.3f} → {after['get.cpu_ms_per']:.3f} "
            f"ms ({before['get.cpu_ms_per'] / after['get.cpu_ms_per']:.1f}x less), idle LIST "
            f"{before['list_idle.cpu_ms_per']:.3f} → {after['list_idle.cpu_ms_per']:.3f} ms, "
            f"1000-key page {before['list_page.cpu_ms_per']:.1f} → "
            f"{after['list_page.cpu_ms_per']:.1f} ms"
        )
    loads = [x for m in medians.values() for x in (m.get("loadavg") or [])]
    if loads:
        warn = (
            " (**above 1.5**: moto and the proxy, which serve these runs, count in it too;"
            " other work may have shared the 2 cores as well: compare the ratios)"
            if max(loads) > 1.5
            else ""
        )
        L.append(f"- 1-min load average during the runs: {min(loads):.1f}–{max(loads):.1f}{warn}")
    git = section.get("git") or {}
    L.append(
        f"- measured {section['measured_at']}, commit {git.get('commit', '?')}"
        + (" (dirty tree)" if git.get("dirty") else "")
        + f", nproc {section.get('nproc')}"
    )
    L.append(
        "- the system share is mostly the kernel's loopback TCP work for the request and its "
        "answer, charged to the sending process; a real network moves part of it to the NIC"
    )
    L.append("")


if __name__ == "__main__":
    raise SystemExit("run it through bench/run.py --s3-cpu")
