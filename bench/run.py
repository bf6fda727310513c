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
import datetime as _dt
import json
import os
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import make_trial  # noqa: E402  (stdlib-only at import time)
from s3_cpu_run import report_s3_cpu, s3_cpu_main  # noqa: E402
from workloads import FLOOR_WORKLOADS, S3_WORKLOADS, WORKLOADS  # noqa: E402

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


# --------------------------------------------------------------------------------------------
# preparation


def ensure_smdebug_venv() -> None:
    log("checking the smdebug 1.0.34 venv (bench/setup_smdebug.sh)")
    subprocess.run(["bash", os.path.join(HERE, "setup_smdebug.sh")], check=True, stdout=sys.stderr)


def trial_params(trial: str) -> argparse.Namespace:
    """make_trial.py's parameters for this trial: its defaults, or those in an existing manifest."""
    ns = argparse.Namespace(out=trial, steps=2000, tensors=50, size=256, seed=1234)
    try:
        with open(make_trial.manifest_path(trial)) as f:
            m = json.load(f)
        for k in ("steps", "tensors", "size", "seed"):
            setattr(ns, k, int(m.get(k, getattr(ns, k))))
    except (OSError, ValueError, TypeError):
        pass
    return ns


def ensure_trial(trial: str) -> dict:
    """Write the trial with smdebug's writer unless it is complete; return its manifest."""
    args = trial_params(trial)
    if not make_trial.is_complete(trial, make_trial.wanted_manifest(args)):
        ensure_smdebug_venv()
        log(f"writing the trial with smdebug's own writer (about 2 minutes): {rel(trial)}")
        subprocess.run(
            [
                SMDEBUG_PY,
                os.path.join(HERE, "make_trial.py"),
                "--out",
                trial,
                "--steps",
                str(args.steps),
                "--tensors",
                str(args.tensors),
                "--size",
                str(args.size),
                "--seed",
                str(args.seed),
            ],
            check=True,
            stdout=sys.stderr,
        )
    with open(make_trial.manifest_path(trial)) as f:
        return json.load(f)


def ensure_mixed_trial(trial: str) -> dict:
    """Write the rules trial (make_trial.py --kind mixed) unless it is complete; its manifest."""
    args = argparse.Namespace(out=trial, kind="mixed", steps=2000, seed=1234)
    if not make_trial.is_complete(trial, make_trial.wanted_manifest(args)):
        ensure_smdebug_venv()
        log(f"writing the rules trial with smdebug's own writer (about 40 s): {rel(trial)}")
        subprocess.run(
            [SMDEBUG_PY, os.path.join(HERE, "make_trial.py"), "--kind", "mixed", "--out", trial],
            check=True,
            stdout=sys.stderr,
        )
    with open(make_trial.manifest_path(trial)) as f:
        return json.load(f)


def warm_page_cache(trial: str) -> None:
    n = 0
    for d, _, fs in os.walk(trial):
        for f in fs:
            with open(os.path.join(d, f), "rb") as fh:
                while fh.read(1 << 20):
                    pass
            n += 1
    log(f"page cache warmed: {n} files")


def probe_ours(py: str) -> str | None:
    """None when evaluator.trial.create_trial imports, else the reason it does not."""
    if not os.path.exists(py):
        return f"no interpreter {py}"
    code = f"import sys; sys.path.insert(0, {REPO!r}); from evaluator.trial import create_trial"
    p = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=REPO)
    if p.returncode == 0:
        return None
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {p.returncode}"


# --------------------------------------------------------------------------------------------
# S3 via a moto server on 127.0.0.1


class MotoServer:
    def __init__(self, exe: str) -> None:
        self.exe = exe
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.logfile = None

    def __enter__(self) -> MotoServer:
        if not os.path.exists(self.exe):
            raise SystemExit(
                f"no moto_server at {self.exe} (the project's test extra installs moto[server])"
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        os.makedirs(WORK, exist_ok=True)
        self.logfile = open(os.path.join(WORK, "moto_server.log"), "w")
        self.proc = subprocess.Popen(
            [self.exe, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.logfile,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"moto_server exited with {self.proc.returncode}; see {rel(self.logfile.name)}"
                )
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("moto_server did not answer within 60 s") from None
                time.sleep(0.2)
        log(f"moto_server pid {self.proc.pid} on {self.url}")
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict:
        env = {
            k: v
            for k, v in os.environ.items()
            if not (k.startswith("AWS_") or k.startswith("BOTO"))
        }
        env.update(
            {
                "AWS_ENDPOINT_URL": self.url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REGION": "us-east-1",
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true",
            }
        )
        return env

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.logfile:
            self.logfile.close()


# --------------------------------------------------------------------------------------------
# running


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
    py: str, impl: str, trial: str, workload: str, env: dict | None, timeout: float
) -> dict:
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


def median(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 4) if xs else None


def summarize(runs: list[dict]) -> dict:
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


def git_state() -> dict:
    def git(*a):
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


def load_results(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and isinstance(data.get("entries"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"entries": {}}


def save_results(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def entry_key(storage: str, workload: str, impl: str) -> str:
    return f"{storage}/{workload}/{impl}"


# --------------------------------------------------------------------------------------------
# S3 request counts: one extra run per workload and side through a counting proxy


def run_counted(
    py: str,
    impl: str,
    target: str,
    workload: str,
    moto: MotoServer,
    timeout: float,
    keep_alive: bool = False,
) -> dict:
    """Run one workload with AWS_ENDPOINT_URL pointing at a fresh CountingProxy in front of moto."""
    from s3_requests import CountingProxy  # loads tests/support/faulty_proxy.py (stdlib only)

    with CountingProxy(moto.url, keep_alive=keep_alive) as proxy:
        env = dict(moto.env(), AWS_ENDPOINT_URL=proxy.endpoint)
        r = run_one(py, impl, target, workload, env, timeout)
        snap = proxy.snapshot()
    out = {
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


# --------------------------------------------------------------------------------------------
# live latency (bench/live.py): a writer uploads steps at a steady pace, a reader waits for them


class _LineQueue:
    """Lines of a process's stdout, read by a daemon thread, with a bounded wait for the next."""

    def __init__(self, stream) -> None:
        import queue
        import threading

        self._q: queue.Queue[str | None] = queue.Queue()
        self._empty = queue.Empty
        self.closed = False
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        try:
            for line in stream:
                self._q.put(line)
        finally:
            self._q.put(None)

    def get(self, timeout: float) -> dict | None:
        """The next JSON line (None on timeout or at EOF; ``closed`` tells which)."""
        deadline = time.monotonic() + max(0.0, timeout)
        while not self.closed:
            try:
                line = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
            except self._empty:
                return None
            if line is None:
                self.closed = True
                return None
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    pass
        return None


def _wait_event(q: _LineQueue, name: str, timeout: float, sink: list) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not q.closed:
        msg = q.get(deadline - time.monotonic())
        if msg is None:
            continue
        sink.append(msg)
        if msg.get("event") in (name, "error"):
            return msg
    return None


def percentile(xs: list[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not xs:
        return None
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _tail(path: str, n: int = 8) -> str:
    try:
        with open(path, errors="replace") as f:
            return "\n".join(f.read().strip().splitlines()[-n:])
    except OSError:
        return ""


def _stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(10)


def count_requests(
    data: dict,
    impls: list[str],
    pythons: dict,
    target: str,
    workload: str,
    moto: MotoServer,
    args: argparse.Namespace,
    command: str,
    run_id: str,
    git: dict,
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


def run_live_once(
    impl: str,
    reader_py: str,
    writer_py: str,
    moto: MotoServer,
    opts: argparse.Namespace,
    run_no: int,
) -> dict:
    """One live run: returns per-step latencies (seconds) and the raw timestamps' summary."""
    bucket = "bench-live"
    prefix = f"live-{impl}-{int(time.time())}-{run_no}"
    env = moto.env()
    live_py = os.path.join(HERE, "live.py")
    wlog_path = os.path.join(WORK, f"live_writer_{impl}.log")
    rlog_path = os.path.join(WORK, f"live_reader_{impl}.log")
    writer = reader = None
    wmsgs: list[dict] = []
    rmsgs: list[dict] = []
    result: dict = {"bucket": bucket, "prefix": prefix}
    with open(wlog_path, "w") as wlog, open(rlog_path, "w") as rlog:
        try:
            writer = subprocess.Popen(
                [
                    writer_py,
                    live_py,
                    "writer",
                    "--bucket",
                    bucket,
                    "--prefix",
                    prefix,
                    "--steps",
                    str(opts.live_steps),
                    "--tensors",
                    str(opts.live_tensors),
                    "--size",
                    str(opts.live_size),
                    "--pace",
                    str(opts.live_pace),
                    "--end-delay",
                    str(opts.live_end_delay),
                    "--go-timeout",
                    "300",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=wlog,
                text=True,
                env=env,
                cwd=REPO,
            )
            wq = _LineQueue(writer.stdout)
            ready = _wait_event(wq, "ready", 120, wmsgs)
            if not ready or ready.get("event") != "ready":
                return dict(result, error=f"writer not ready: {ready or _tail(wlog_path)}")
            result["writer_ready"] = ready
            reader = subprocess.Popen(
                [
                    reader_py,
                    live_py,
                    "reader",
                    "--impl",
                    impl,
                    "--uri",
                    f"s3://{bucket}/{prefix}",
                    "--steps",
                    str(opts.live_steps),
                    "--poll-interval",
                    str(opts.live_poll),
                ],
                stdout=subprocess.PIPE,
                stderr=rlog,
                text=True,
                env=env,
                cwd=REPO,
            )
            rq = _LineQueue(reader.stdout)
            ready = _wait_event(rq, "ready", 120, rmsgs)
            if not ready or ready.get("event") != "ready":
                return dict(result, error=f"reader not ready: {ready or _tail(rlog_path)}")
            result["reader_ready"] = ready
            go_at = time.monotonic()
            writer.stdin.write("go\n")
            writer.stdin.flush()
            # Everything is bounded: upload time + end delay + a few polls + slack.
            deadline = (
                go_at
                + opts.live_steps * opts.live_pace
                + opts.live_end_delay
                + 3 * max(opts.live_poll, 2.0)
                + opts.live_slack
            )
            w_done = r_done = False
            while time.monotonic() < deadline and not (w_done and r_done):
                for q, sink, is_writer in ((wq, wmsgs, True), (rq, rmsgs, False)):
                    if w_done if is_writer else r_done:
                        continue
                    msg = q.get(0.05)
                    if msg is not None:
                        sink.append(msg)
                        if msg.get("event") in ("done", "error"):
                            if is_writer:
                                w_done = True
                            else:
                                r_done = True
                    elif q.closed:
                        if is_writer:
                            w_done = True
                        else:
                            r_done = True
            result["go_at"] = go_at
            result["timed_out"] = not (w_done and r_done)
        finally:
            if writer is not None and writer.stdin and not writer.stdin.closed:
                try:
                    writer.stdin.close()
                except OSError:
                    pass
            _stop(reader)
            # the writer ends on its own after the end marker; give it a moment, then stop it
            if writer is not None:
                try:
                    writer.wait(opts.live_end_delay + 15)
                except subprocess.TimeoutExpired:
                    _stop(writer)

    landed = {m["step"]: m for m in wmsgs if m.get("event") == "step"}
    seen = {m["step"]: m for m in rmsgs if m.get("event") == "visible"}
    errors = [m.get("error") for m in wmsgs + rmsgs if m.get("event") == "error"]
    lat = []
    per_step = []
    for step in sorted(landed):
        w = landed[step]
        r = seen.get(step)
        row = {
            "step": step,
            "index_put_s": round(w["index_done"] - w["index_start"], 4),
            "step_put_s": round(w["index_done"] - w["started"], 4),
        }
        if r is not None:
            row["latency_s"] = round(r["t"] - w["index_done"], 4)
            lat.append(r["t"] - w["index_done"])
        per_step.append(row)
    starts = [landed[s]["started"] for s in sorted(landed)]
    pace = [b - a for a, b in zip(starts, starts[1:])]
    result.update(
        {
            "steps_uploaded": len(landed),
            "steps_seen": len(seen),
            "latencies_s": [round(x, 4) for x in lat],
            "per_step": per_step,
            "pace_s_median": round(statistics.median(pace), 4) if pace else None,
            "pace_s_max": round(max(pace), 4) if pace else None,
            "index_put_s_median": round(statistics.median([r["index_put_s"] for r in per_step]), 4)
            if per_step
            else None,
        }
    )
    if errors:
        result["error"] = "; ".join(str(e) for e in errors)
    elif len(seen) < opts.live_steps:
        result["error"] = (
            f"the reader saw {len(seen)} of {opts.live_steps} steps"
            + (" before the deadline" if result.get("timed_out") else "")
            + (f"; reader log: {_tail(rlog_path, 4)}" if _tail(rlog_path, 4) else "")
        )
    return result


def summarize_live(runs: list[dict], poll: float) -> dict:
    lat = [x for r in runs for x in r.get("latencies_s", [])]
    if not lat:
        return {}
    worst = max(
        (row for r in runs for row in r.get("per_step", []) if "latency_s" in row),
        key=lambda row: row["latency_s"],
    )
    p50, p95 = percentile(lat, 0.50), percentile(lat, 0.95)
    target = poll + 0.2
    return {
        "n": len(lat),
        "poll_interval_s": poll,
        "target_p50_s": round(target, 3),
        "p50_s": round(p50, 4),
        "p95_s": round(p95, 4),
        "max_s": round(max(lat), 4),
        "max_step": worst["step"],
        "min_s": round(min(lat), 4),
        "mean_s": round(statistics.fmean(lat), 4),
        "p50_within_target": p50 < target,
    }


def live_main(args: argparse.Namespace, data: dict, impls: list[str], command: str) -> int:
    """--live: the live-latency workload for each side, against a moto server started here."""
    failures: list[str] = []
    git = git_state()
    run_id = now_iso()
    pythons = {"smdebug": SMDEBUG_PY, "ours": args.ours_python}
    repeat = args.repeat or 1
    with MotoServer(args.moto_server) as moto:
        for impl in impls:
            poll = 2.0 if impl == "smdebug" else args.live_poll
            runs = []
            for rep in range(repeat):
                log(
                    f"live {impl} run {rep + 1}/{repeat}: {args.live_steps} steps every {args.live_pace} s, "
                    f"poll interval {poll} s"
                )
                r = run_live_once(impl, pythons[impl], args.ours_python, moto, args, rep)
                runs.append(r)
                if "error" in r:
                    log(f"  FAILED: {r['error'][:300]}")
                one = summarize_live([r], poll)
                if one:
                    log(
                        f"  {one['n']} steps: p50 {one['p50_s']:.3f} s, p95 {one['p95_s']:.3f} s, "
                        f"max {one['max_s']:.3f} s (target p50 < {one['target_p50_s']:.2f} s)"
                    )
            entry = {
                "impl": impl,
                "measured_at": now_iso(),
                "run_id": run_id,
                "command": command,
                "git": git if impl == "ours" else None,
                "params": {
                    "steps": args.live_steps,
                    "tensors": args.live_tensors,
                    "size": args.live_size,
                    "pace_s": args.live_pace,
                    "end_delay_s": args.live_end_delay,
                    "poll_interval_s": poll,
                    "poll_interval_configurable": impl == "ours",
                },
                "env": next((r.get("reader_ready") for r in runs if r.get("reader_ready")), None),
                "runs": runs,
                "summary": summarize_live(runs, poll),
                "loadavg_1min": round(os.getloadavg()[0], 2),
            }
            bad = [r["error"] for r in runs if "error" in r]
            if bad:
                entry["error"] = bad[0]
                failures.append(f"live/{impl}: {bad[0].splitlines()[0][:200]}")
            data.setdefault("live", {})[impl] = entry
            save_results(args.results, data)
    problems = write_report(data, args.report, args.results)
    log(f"wrote {rel(args.results)} and {rel(args.report)}")
    for f in failures + problems:
        log(f"PROBLEM: {f}")
    return 1 if failures or problems else 0


# --------------------------------------------------------------------------------------------
# report


def fmt_s(x) -> str:
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 0.1:
        return f"{x:.2f}"
    if x >= 0.001:
        return f"{x:.4f}"
    return f"{x:.2g}"


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def fmt_ratio(r) -> str:
    if r is None:
        return "–"
    if r >= 1000:
        return "> 1000x"
    return f"{r:.1f}x" if r >= 10 else f"{r:.2f}x"


def fmt_floor_ratio(r) -> str:
    return "–" if r is None else f"{r:.1f}x"


def load_and_cpu(runs: list[dict]) -> str:
    """The runs' 1-min load average range and process CPU seconds, as a section line says
    them ("" when not recorded)."""
    text = ""
    loads = [x for r in runs for x in (r.get("loadavg_1min") or [])]
    if loads:
        text += f"; 1-min load avg {min(loads):.1f}–{max(loads):.1f}"
        if max(loads) > 2.0:  # the benchmark itself accounts for about 1
            text += " (other work was running: figures may be inflated)"
    cpu = [r["process_cpu_s"] for r in runs if r.get("process_cpu_s") is not None]
    if cpu:
        text += "; process CPU s: " + ", ".join(fmt_s(c) for c in cpu)
    return text


def floor_figures(entries: dict, storage: str, workload: str) -> dict | None:
    """The floor's side of a workload that has one (None otherwise), compared like with like.

    metadata: ours' total (create_trial + the four calls) against the floor's headline
    ``seconds``, the index files read and parsed plus the steps and sorted names
    (``index_and_names``; the floor's ``total_s`` is its ``index`` phase alone).  values_all:
    ours' reads (both passes; its checksum is timed apart, not in them) against the floor's
    reads (both passes; it hashes nothing).  An older ours entry whose reads held the checksum
    also carries ``reads_net``; that key is ignored.
    """
    if storage != "local" or workload not in FLOOR_OF:
        return None
    fe = entries.get(entry_key(storage, workload, FLOOR)) or {}
    oe = entries.get(entry_key(storage, workload, "ours")) or {}
    fs, ou = fe.get("summary") or {}, oe.get("summary") or {}
    out: dict = {"entry": fe or None, "floor_s": None, "ours_s": None, "ratio": None}
    if not fs:
        return out
    if workload == "metadata":
        out["floor_s"], out["ours_s"] = fs.get("seconds"), ou.get("total_s")
    else:
        out["floor_s"] = (fs.get("phases") or {}).get("reads")
        out["ours_s"] = (ou.get("phases") or {}).get("reads")
    out["comparable"] = not ou or oe.get("trial_params") == fe.get("trial_params")
    if out["comparable"]:
        out["ratio"] = ratio(out["ours_s"], out["floor_s"])
    return out


def floor_line(data: dict, storage: str, workload: str, problems: list[str]) -> str | None:
    """The per-workload section's line for the floor's runs (None for a workload without one)."""
    entries = data["entries"]
    ff = floor_figures(entries, storage, workload)
    if ff is None:
        return None
    e = ff["entry"]
    name = FLOOR_OF[workload]
    line = f"- floor (`{name}`: no reader, ours' interpreter): {side_status(e)}"
    if not e:
        line += " (run.py runs it whenever ours runs this workload)"
    if not (e and e.get("summary")):
        return line
    runs = [r for r in e["runs"] if "error" not in r]
    what = "index files + steps and names" if workload == "metadata" else "reads (both passes)"
    line += f"; {what} per run: " + ", ".join(fmt_s(r.get("seconds")) for r in runs) + " s"
    if not ff["comparable"]:
        line += "; **measured on a different trial from ours'**: no ratio"
    elif workload == "metadata":
        line += f"; ours' total / floor: **{fmt_floor_ratio(ff['ratio'])}**"
    else:
        line += f"; ours' reads / floor: **{fmt_floor_ratio(ff['ratio'])}**"
    line += load_and_cpu(runs)
    s = e["summary"]
    if len(s.get("checksums") or []) > 1:
        line += "; **its repeats framed different bytes**"
        problems.append(f"{storage}/{workload}/{FLOOR}: its repeats disagree")
    ou = (entries.get(entry_key(storage, workload, "ours")) or {}).get("summary") or {}
    if workload != "metadata" and ou.get("meta_checksums") and ff["comparable"]:
        # floor_values hashes the steps and names as values_all does (metadata adds modes/workers)
        if s.get("meta_checksums") == ou["meta_checksums"]:
            line += "; steps and names: same as ours'"
        else:
            line += "; steps and names: **DIFFERENT from ours'**"
            problems.append(f"{storage}/{workload}/{FLOOR}: steps/tensor names differ from ours'")
    oe = entries.get(entry_key(storage, workload, "ours"))
    if oe and oe.get("summary") and not same_run(e, oe):
        line += "; measured in a **separate run** from ours'"
    if (e.get("git") or {}).get("commit"):
        line += f"; commit {e['git']['commit']}{' (dirty)' if e['git'].get('dirty') else ''}"
    return line


def compare(entries: dict, storage: str, workload: str) -> tuple[str, bool]:
    """('match' | 'MISMATCH ...' | 'n/a ...', is_mismatch)"""
    if workload in RULES_WORKLOADS:
        return rules_compare(entries, storage, workload)
    sides = {}
    for impl in IMPLS:
        e = entries.get(entry_key(storage, workload, impl))
        s = (e or {}).get("summary") or {}
        if s:
            sides[impl] = s
    for impl, s in sides.items():
        if len(s["checksums"]) > 1 or len(s["meta_checksums"]) > 1:
            return f"MISMATCH: {impl}'s repeats disagree", True
    if len(sides) < 2:
        return "n/a (one side only)", False
    params = {
        impl: (entries[entry_key(storage, workload, impl)].get("trial_params")) for impl in IMPLS
    }
    if params["smdebug"] != params["ours"]:
        return "n/a: measured on different trials", True
    a, b = sides["smdebug"], sides["ours"]
    if a["checksums"] != b["checksums"]:
        return "MISMATCH: values differ", True
    if a["meta_checksums"] != b["meta_checksums"]:
        return "MISMATCH: steps/tensor names differ", True
    return "match", False


def same_run(a: dict, b: dict) -> bool:
    if a.get("run_id") or b.get("run_id"):
        return a.get("run_id") == b.get("run_id")
    if a.get("command") != b.get("command"):
        return False
    try:
        ta, tb = (_dt.datetime.strptime(e["measured_at"], "%Y-%m-%dT%H:%M:%SZ") for e in (a, b))
    except (KeyError, ValueError):
        return False
    return abs((ta - tb).total_seconds()) < 3600


def side_status(e: dict | None, unavailable: dict | None = None) -> str:
    if not e:
        if unavailable:
            return f"not run: evaluator.trial did not import ({unavailable['reason']}, {unavailable['at']})"
        return "not run yet"
    if e.get("summary"):
        return f"{e['summary']['n_ok']} run(s), {e['measured_at']}"
    return "failed: " + (e.get("error") or "?").splitlines()[0][:120]


KIND_LABELS = (
    ("LIST", "LIST"),
    ("GET", "GET"),
    ("RANGED_GET", "ranged GET"),
    ("HEAD", "HEAD"),
    ("OTHER", "other"),
)


def report_requests(L: list[str], data: dict, problems: list[str]) -> None:
    reqs = data.get("requests") or {}
    if not reqs:
        return
    entries = data["entries"]
    L.append("## S3 requests")
    L.append("")
    L.append(
        "One extra run per workload and side (after the timed runs, in the same `--s3` run) with "
        "`AWS_ENDPOINT_URL` pointing at a counting proxy on 127.0.0.1 in front of the moto server "
        "(`bench/s3_requests.py`, built on tests/support/faulty_proxy.py with no faults). "
        "Every request the server would see is counted, retries included: **LIST** = ListObjects(V2) "
        "(a GET with `list-type`/`prefix`/...), **GET** = a whole-object GET, **ranged GET** = a GET "
        "with a `Range` header, **HEAD**, **other** = anything else. MiB = response bodies received."
    )
    L.append("")
    L.append(
        "| workload | side | LIST | GET | ranged GET | HEAD | other | total | MiB received | values |"
    )
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    totals: dict[str, dict[str, int]] = {}
    for workload in S3_WORKLOADS:
        for impl in IMPLS:
            e = reqs.get(entry_key("s3", workload, impl))
            if not e:
                continue
            if "error" in e or not e.get("counts"):
                L.append(
                    f"| {workload} | {impl} | failed: {(e.get('error') or '?').splitlines()[0][:80]} "
                    "| | | | | | | |"
                )
                continue
            c = e["counts"]
            totals.setdefault(workload, {})[impl] = c["total"]
            mib = sum((e.get("body_bytes") or {}).values()) / 2**20
            timed = ((entries.get(entry_key("s3", workload, impl)) or {}).get("summary") or {}).get(
                "checksums"
            )
            if not timed:
                values = "–"
            elif [e.get("checksum")] == timed:
                values = "same as the timed run"
            else:
                values = "DIFFERENT from the timed run"
                problems.append(f"s3 requests/{workload}/{impl}: values differ from the timed run")
            cells = " | ".join(str(c.get(k, 0)) for k, _ in KIND_LABELS)
            L.append(f"| {workload} | {impl} | {cells} | **{c['total']}** | {mib:.1f} | {values} |")
    L.append("")
    for workload, t in totals.items():
        if "smdebug" in t and "ours" in t and t["ours"]:
            L.append(
                f"- {workload}: smdebug makes {t['smdebug'] / t['ours']:.1f}x as many requests as ours "
                f"({t['smdebug']} vs {t['ours']})."
            )
    trial = data.get("trial") or {}
    if trial.get("steps"):
        L.append(
            f"- The trial has {trial['steps']} index files and {trial['steps']} event files "
            "(a LIST page holds at most 1000 keys). DESIGN.md §6 asks for one GET per index file, one "
            "ranged GET per event file a read needs, and never a LIST per tensor read."
        )
    ka = sorted({bool(e.get("keep_alive")) for e in reqs.values()})
    if ka == [False]:
        L.append(
            "- The proxy closed each connection after its answer, as the moto server does "
            "(`Connection: close`), so the readers connect as in the timed runs."
        )
    elif True in ka:
        L.append(
            "- **Some runs kept client connections alive** (`--requests-keep-alive`), unlike the moto "
            "server: smdebug's forked index readers then share sockets and can read wrong values."
        )
    when = sorted({e.get("measured_at") for e in reqs.values() if e.get("measured_at")})
    if when:
        L.append(
            f"- measured {when[0]}"
            + (f" to {when[-1]}" if len(when) > 1 else "")
            + "; the proxy adds latency, so these runs' seconds are not used anywhere."
        )
    L.append("")


def report_live(L: list[str], data: dict) -> None:
    live = data.get("live") or {}
    if not live:
        return
    L.append("## Live latency")
    L.append("")
    L.append(
        "`bench/live.py`: a writer process uploads the steps of a trial to the moto server one at a time "
        "at a steady pace (event file, then index file, with boto3; the bytes come from "
        "`evaluator.testing.TrialWriter`), while a reader process calls `wait_for_steps([s])` for each "
        "step in order. **Latency** = from the index file's PUT returning to `wait_for_steps` returning. "
        "Target (docs/DESIGN.md §6): p50 below the poll interval + 200 ms."
    )
    L.append("")
    L.append(
        "| side | poll interval s | steps seen | p50 s | p95 s | max s | min s | target: p50 < s | met |"
    )
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|:-:|")
    for impl in IMPLS:
        e = live.get(impl)
        if not e:
            continue
        s = e.get("summary") or {}
        poll = (e.get("params") or {}).get("poll_interval_s")
        poll_txt = f"{poll:g}" + ("" if impl == "ours" else " (fixed)") if poll is not None else "–"
        if not s:
            L.append(
                f"| {impl} | {poll_txt} | 0 | failed: {(e.get('error') or '?').splitlines()[0][:80]} "
                "| | | | | |"
            )
            continue
        want = sum(r.get("steps_uploaded", 0) for r in e["runs"])
        L.append(
            f"| {impl} | {poll_txt} | {s['n']} of {want} | {s['p50_s']:.3f} | {s['p95_s']:.3f} | "
            f"{s['max_s']:.3f}{' (step ' + str(s['max_step']) + ')' if 'max_step' in s else ''} | {s['min_s']:.3f} | {s['target_p50_s']:.2f} | "
            f"{'yes' if s['p50_within_target'] else 'NO'} |"
        )
    L.append("")
    for impl in IMPLS:
        e = live.get(impl)
        if not e:
            continue
        prm = e.get("params") or {}
        runs = e.get("runs") or []
        paces = [r["pace_s_median"] for r in runs if r.get("pace_s_median") is not None]
        puts = [r["index_put_s_median"] for r in runs if r.get("index_put_s_median") is not None]
        line = (
            f"- {impl}: {len(runs)} run(s), {e.get('measured_at')}; {prm.get('steps')} steps of "
            f"{prm.get('tensors')} float32 tensors x {prm.get('size')} values, one every {prm.get('pace_s')} s "
            f"(achieved median {statistics.median(paces):.3f} s)"
            if paces
            else f"- {impl}: {len(runs)} run(s), {e.get('measured_at')}"
        )
        if puts:
            line += f"; index PUT median {statistics.median(puts) * 1000:.0f} ms"
        if e.get("loadavg_1min") is not None:
            line += f"; 1-min load avg after {e['loadavg_1min']:.1f}"
        if impl == "ours" and (e.get("git") or {}).get("commit"):
            line += f"; commit {e['git']['commit']}{' (dirty)' if e['git'].get('dirty') else ''}"
        if e.get("error"):
            line += f"; **problem:** {e['error'].splitlines()[0][:200]}"
        L.append(line)
    if "smdebug" in live:
        L.append(
            "- smdebug's `wait_for_steps` sleeps a hard-coded 2 s between checks, so its latency is "
            "judged against 2 s + 200 ms; it has no poll-interval option."
        )
    L.append("")


# --------------------------------------------------------------------------------------------
# the rules workload (bench/rules_workload.py): per-rule figures


def _rules_runs(
    entries: dict, storage: str, impl: str, workload: str = RULES_WORKLOAD
) -> list[dict]:
    e = entries.get(entry_key(storage, workload, impl)) or {}
    return [r for r in e.get("runs") or [] if "error" not in r and isinstance(r.get("rules"), dict)]


def _ran(run: dict) -> dict:
    return {n: r for n, r in run["rules"].items() if r.get("status") == "ran"}


def rules_common(entries: dict, storage: str, workload: str = RULES_WORKLOAD) -> dict:
    """Rules that ran in every run of both sides, and each side's median of create_trial + those
    rules (None for a side without runs)."""
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    sets = [set(_ran(r)) for i in IMPLS for r in runs[i]]
    common = sorted(set.intersection(*sets)) if sets and all(runs.values()) else []
    out: dict = {"rules": common}
    for i in IMPLS:
        totals = [
            r["phases"]["create_trial"] + sum(_ran(r)[n]["seconds"] for n in common)
            for r in runs[i]
        ]
        out[i] = median(totals) if totals and common else None
    return out


def _fired_sig(rec: dict) -> tuple:
    return (rec.get("fired_hash"), rec.get("fired_n"), rec.get("evaluated"))


def _rule_agreement(
    entries: dict, storage: str, workload: str = RULES_WORKLOAD
) -> dict[str, tuple[str, bool]]:
    """Per rule that ran somewhere: (verdict, is_mismatch)."""
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    names = sorted({n for i in IMPLS for r in runs[i] for n in _ran(r)})
    out: dict[str, tuple[str, bool]] = {}
    for n in names:
        sigs: dict[str, set] = {}
        for i in IMPLS:
            sigs[i] = {_fired_sig(_ran(r)[n]) for r in runs[i] if n in _ran(r)}
        params = {
            json.dumps(_ran(r)[n].get("params"), sort_keys=True)
            for i in IMPLS
            for r in runs[i]
            if n in _ran(r)
        }
        bad_repeat = [i for i in IMPLS if len(sigs[i]) > 1]
        if len(params) > 1:  # rules_plan.py changed between the stored runs
            out[n] = ("n/a: the stored runs used different parameters (run both sides again)", True)
        elif bad_repeat:
            out[n] = (f"MISMATCH: {bad_repeat[0]}'s repeats disagree", True)
        elif not sigs["smdebug"] or not sigs["ours"]:
            out[n] = ("n/a (one side only)", False)
        elif sigs["smdebug"] == sigs["ours"]:
            out[n] = ("yes", False)
        else:
            (a,), (b,) = sigs["smdebug"], sigs["ours"]
            what = "fired steps" if a[0] != b[0] else "steps evaluated"
            out[n] = (f"**NO**: {what} differ", True)
    return out


def rules_compare(entries: dict, storage: str, workload: str = RULES_WORKLOAD) -> tuple[str, bool]:
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    if not runs["smdebug"] or not runs["ours"]:
        return "n/a (one side only)", False
    params = {i: (entries[entry_key(storage, workload, i)].get("trial_params")) for i in IMPLS}
    if params["smdebug"] != params["ours"]:
        return "n/a: measured on different trials", True
    agree = _rule_agreement(entries, storage, workload)
    bad = [n for n, (_, b) in agree.items() if b]
    both = [n for n, (v, _) in agree.items() if v == "yes"]
    if bad:
        return f"MISMATCH: fired steps of {', '.join(bad)}", True
    return f"match: fired steps of {len(both)} rules", False


def _params_text(params: dict) -> str:
    if not params:
        return "defaults"
    return ", ".join(f"{k}={v}" for k, v in params.items())


def report_rules(
    L: list[str], data: dict, storage: str, problems: list[str], workload: str = RULES_WORKLOAD
) -> None:
    entries = data["entries"]
    es = {i: entries.get(entry_key(storage, workload, i)) for i in IMPLS}
    runs = {i: _rules_runs(entries, storage, i, workload) for i in IMPLS}
    L.append(f"## {storage}: {workload}")
    L.append("")
    mixed = (data.get("trials") or {}).get("mixed") or {}
    if workload == RULES_MIXED_WORKLOAD:
        L.append(
            f"On the rules trial `{mixed.get('path', rel(make_trial.MIXED_OUT))}` "
            f"({mixed.get('steps', '?')} global steps, every {mixed.get('eval_every', '?')}th "
            f"an EVAL step, {mixed.get('files', '?')} files, "
            f"{(mixed.get('bytes') or 0) / 2**20:.0f} MiB, written by smdebug "
            f"{mixed.get('smdebug_version', '?')}'s own FileWriter, seed {mixed.get('seed', '?')}): "
            "a scalar loss, labels and predictions, ReLU/tanh/sigmoid layer inputs and outputs, "
            "weights and gradients, XGBoost-style feature importances, tree node ids, metrics and "
            "hyperparameters (bench/mixed_trial.py), with the plan `PLAN_MIXED`. A rule with an "
            "end-of-data judgement (`invoke_at_end`: Confusion, Overfit, "
            "FeatureImportanceOverweight) gets it on smdebug's side too, called once by the "
            "workload after smdebug's `invoke_rule` ends."
        )
        L.append("")
    L.append(
        "`bench/rules_workload.py`: **the same rule classes** (`rules_builtin/` of this checkout) on "
        "both sides, each rule over all steps of the trial, one after the other on one trial "
        "opened once. **ours**: `evaluator.trial.create_trial`, `build_rule`, "
        "`invoke_rule(rule, raise_eval_cond=False, continue_after_fire=True)`. **smdebug**: "
        "stand-in `evaluator.*` modules make the rule modules subclass `smdebug.rules.Rule` and "
        "raise/catch smdebug's exceptions; `smdebug.trials.create_trial`, `cls(trial, **params)`, "
        "`smdebug.rules.invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=False)` "
        "until its `NoMoreData`. Parameters: `bench/rules_plan.py` (chosen so that each rule reads "
        "the trial's tensors at every step and, where its logic allows, fires at some steps). "
        "A rule's seconds = build (and, for SimilarAcrossRuns, opening the other trial) + the "
        "whole invoke_rule walk. **Fired steps agree** = same steps evaluated and the same list "
        "of fired steps (hash)."
    )
    L.append("")
    if not runs["smdebug"] and not runs["ours"]:
        for i in IMPLS:
            L.append(f"- {i}: {side_status(es[i])}")
        L.append("")
        return
    med = {i: (es[i] or {}).get("summary", {}).get("phases", {}) for i in IMPLS}
    agree = _rule_agreement(entries, storage, workload)
    sample = {i: (runs[i][0] if runs[i] else None) for i in IMPLS}
    names = sorted({n for i in IMPLS if sample[i] for n in sample[i]["rules"]})
    L.append(
        "| rule | parameters | smdebug s | ours s | smdebug / ours | fired: smdebug | fired: ours "
        "| fired steps agree |"
    )
    L.append("|---|---|---:|---:|---:|---:|---:|:-:|")
    excluded: list[str] = []
    skipped: list[tuple[str, str]] = []
    for n in names:
        recs = {i: (sample[i]["rules"].get(n) if sample[i] else None) for i in IMPLS}
        any_rec = recs["ours"] or recs["smdebug"]
        if any_rec.get("status") == "skipped":
            skipped.append((n, any_rec.get("why", "")))
            continue
        secs = {i: med[i].get(f"rule:{n}") for i in IMPLS}
        fired = {}
        for i in IMPLS:
            r = recs[i]
            if r is None:
                fired[i] = "–"
            elif r.get("status") == "ran":
                fired[i] = str(r.get("fired_n"))
            else:
                fired[i] = r.get("status", "?")
                if r.get("status") == "error":
                    excluded.append(f"{n} on {i}: {r.get('error')}")
        verdict = agree.get(n, ("–", False))[0]
        params = _params_text(any_rec.get("params") or {})
        if not any_rec.get("planned", True):
            params += " (not in the plan)"
        L.append(
            f"| {n} | {params} | {fmt_s(secs['smdebug'])} | {fmt_s(secs['ours'])} | "
            f"{fmt_ratio(ratio(secs['smdebug'], secs['ours']))} | {fired['smdebug']} | {fired['ours']} | "
            f"{verdict} |"
        )
    common = rules_common(entries, storage, workload)
    ct = {i: med[i].get("create_trial") for i in IMPLS}
    L.append(
        f"| create_trial (once) | | {fmt_s(ct['smdebug'])} | {fmt_s(ct['ours'])} | "
        f"{fmt_ratio(ratio(ct['smdebug'], ct['ours']))} | | | |"
    )
    sp = ratio(common["smdebug"], common["ours"])
    target = "–" if sp is None else ("yes" if sp >= TARGET_SPEEDUP else "NO")
    L.append(
        f"| **total** (create_trial + the {len(common['rules'])} rules both ran) | | "
        f"**{fmt_s(common['smdebug'])}** | **{fmt_s(common['ours'])}** | **{fmt_ratio(sp)}** | | | "
        f"≥{TARGET_SPEEDUP:.0f}x: **{target}** |"
    )
    peaks = {i: (es[i] or {}).get("summary", {}).get("peak_rss_mib") for i in IMPLS}
    mr = ratio(peaks["smdebug"], peaks["ours"])
    L.append(
        f"| peak RSS of the process, MiB | | {fmt_s(peaks['smdebug'])} | {fmt_s(peaks['ours'])} | "
        f"{fmt_ratio(mr)} | | | lower: {'–' if mr is None else ('yes' if mr > 1 else 'NO')} |"
    )
    L.append("")
    if workload == RULES_WORKLOAD:
        L.append(
            'Reference (shared/bench/README.md): smdebug 1.0.34 ran "9 rules over all 2000 steps '
            'through `invoke_rule`" in 109 s, 565 MiB on this kind of machine; which rules and '
            "parameters it used is not recorded, so compare the ratio measured here, not the "
            "absolute seconds."
        )
        L.append("")
    only = {
        i: sorted(
            n for n in (set(_ran(sample[i])) if sample[i] else set()) if n not in common["rules"]
        )
        for i in IMPLS
    }
    if excluded or any(only.values()):
        L.append("Not in the total (run by one side only):")
        L.append("")
        for x in excluded:
            L.append(f"- {x}")
        for i in IMPLS:
            if only[i]:
                L.append(f"- ran on {i} only: {', '.join(only[i])}")
        L.append("")
    for n, (v, bad) in agree.items():
        if bad:
            problems.append(f"{storage}/{workload}: {n}: {v.replace('*', '')}")
    if skipped:
        which = "SKIP_MIXED" if workload == RULES_MIXED_WORKLOAD else "SKIP"
        L.append(f"Built-in rules not run on this trial (`{which}` in bench/rules_plan.py):")
        L.append("")
        for n, why in skipped:
            L.append(f"- **{n}**: {why}")
        L.append("")
    fails = {
        m: err
        for i in IMPLS
        if sample[i]
        for m, err in (sample[i].get("import_failures") or {}).items()
    }
    if fails:
        L.append("Rule modules that did not import (their rules did not run):")
        L.append("")
        for i in IMPLS:
            for m, err in sorted(((sample[i] or {}).get("import_failures") or {}).items()):
                L.append(f"- {i}: `rules_builtin.{m}`: {err}")
        L.append("")
    whys = {n: (sample["ours"] or sample["smdebug"])["rules"][n] for n in names}
    L.append("What each rule does here:")
    L.append("")
    for n, r in whys.items():
        if r.get("status") != "skipped" and r.get("why"):
            L.append(f"- **{n}**: {r['why']}")
    L.append("")
    for i in IMPLS:
        e = es[i]
        line = f"- {i}: {side_status(e)}"
        if e and e.get("summary"):
            ok = [r for r in e["runs"] if "error" not in r]
            line += (
                "; total of everything it ran per run: "
                + ", ".join(fmt_s(r.get("total_s")) for r in ok)
                + " s"
            )
            line += load_and_cpu(ok)
            rss = [
                r.get("rss_after_import_mib")
                for r in ok
                if r.get("rss_after_import_mib") is not None
            ]
            if rss:
                line += f"; RSS after the imports {fmt_s(rss[0])} MiB"
            if i == "ours" and (e.get("git") or {}).get("commit"):
                line += (
                    f"; commit {e['git']['commit']}{' (dirty)' if e['git'].get('dirty') else ''}"
                )
        L.append(line)
    if es["smdebug"] and es["ours"] and runs["smdebug"] and runs["ours"]:
        L.append(
            "- both sides measured in the same run (alternating)"
            if same_run(es["smdebug"], es["ours"])
            else "- the two sides were measured in **separate runs**: the machine's load may differ"
        )
    L.append("")


def write_report(data: dict, path: str, results_path: str = RESULTS_JSON) -> list[str]:
    """Write RESULTS.md; return the list of problems (checksum mismatches)."""
    entries = data["entries"]
    problems: list[str] = []
    L: list[str] = []
    L.append("# Benchmark: our trial reader vs smdebug 1.0.34")
    L.append("")
    L.append(
        f"_Generated {now_iso()} by `bench/run.py` from `{rel(results_path)}`; do not edit by hand "
        "(`.venv/bin/python bench/run.py --report-only` rewrites it). How to read it: bench/README.md._"
    )
    L.append("")
    L.append(
        f"Targets (docs/DESIGN.md §6): at least **{TARGET_SPEEDUP:.0f}x** smdebug's speed "
        "(speed-up = smdebug seconds / ours seconds) and a **lower peak memory** "
        "(memory ratio = smdebug MiB / ours MiB, above 1 is better). Medians of fresh-process runs; "
        "peak memory is the whole process's `ru_maxrss` (interpreter and imports included)."
    )
    L.append("")
    trial = data.get("trial") or {}
    if trial:
        L.append(
            f"Trial: `{trial.get('path', '?')}`: {trial.get('steps')} steps x {trial.get('tensors')} "
            f"float32 tensors x {trial.get('size')} values, 1 worker ({trial.get('worker')}), "
            f"TRAIN mode, {trial.get('files')} files, {trial.get('bytes', 0) / 2**20:.0f} MiB, "
            f"written by smdebug {trial.get('smdebug_version')}'s own FileWriter (seed {trial.get('seed')}). "
            "S3 runs read the same files uploaded to a moto server on 127.0.0.1 (it shares the 2 cores)."
        )
        L.append("")

    # Summary
    L.append("## Summary")
    L.append("")
    L.append(
        "The **floor** is what the same answers cost with no reader at all: the index files read "
        "and parsed, the event files read and each record framed, in a plain loop "
        '(`floor_metadata`, `floor_values` of bench/workloads.py; bench/README.md, "Floors"). '
        "run.py runs it as a third side in the same alternating loop as local metadata and "
        "values_all, under ours' interpreter. **ours / floor** = ours seconds / floor seconds "
        "(lower is better): for metadata, ours' total against the floor's index files read and "
        "parsed plus the steps and sorted names; for values_all, on the reads row only, ours' "
        "reads (both passes, with the checksum of the values timed apart, not in them) against "
        "the floor's two passes, which hash nothing."
    )
    L.append("")
    L.append(
        "| storage | workload | smdebug s | ours s | speed-up | ≥10x | floor s | ours / floor "
        "| smdebug peak MiB | ours peak MiB | memory ratio | lower | values |"
    )
    L.append("|---|---|---:|---:|---:|:-:|---:|---:|---:|---:|---:|:-:|---|")
    combos = []
    for storage in ("local", "s3"):
        for workload in LOCAL_WORKLOADS:
            if any(entry_key(storage, workload, i) in entries for i in IMPLS):
                combos.append((storage, workload))
    for storage, workload in combos:
        sm = (entries.get(entry_key(storage, workload, "smdebug")) or {}).get("summary") or {}
        ou = (entries.get(entry_key(storage, workload, "ours")) or {}).get("summary") or {}
        verdict, bad = compare(entries, storage, workload)
        if bad:
            problems.append(f"{storage}/{workload}: {verdict}")
        mr = ratio(sm.get("peak_rss_mib"), ou.get("peak_rss_mib"))
        lines = [(workload, sm.get("total_s"), ou.get("total_s"), True)]
        # The floor's cells, on the row whose ours figure it is compared with.
        ff = floor_figures(entries, storage, workload) or {}
        floor_cells = "– | –"
        if ff.get("entry"):
            floor_cells = f"{fmt_s(ff['floor_s'])} | {fmt_floor_ratio(ff['ratio'])}"
        floor_row = 0 if workload == "metadata" else 1
        if workload in RULES_WORKLOADS:
            common = rules_common(entries, storage, workload)
            label = f"{workload} ({len(common['rules'])} run by both: create_trial + the rules)"
            lines = [(label, common["smdebug"], common["ours"], True)]
        elif workload != "metadata":
            lines.append(
                (
                    f"{workload}: reads only",
                    (sm.get("phases") or {}).get("reads"),
                    (ou.get("phases") or {}).get("reads"),
                    False,
                )
            )
        for row, (label, a, b, first) in enumerate(lines):
            sp = ratio(a, b)
            mem = (
                (
                    f"{fmt_s(sm.get('peak_rss_mib'))} | {fmt_s(ou.get('peak_rss_mib'))} | {fmt_ratio(mr)} | "
                    f"{'–' if mr is None else ('yes' if mr > 1 else 'NO')} | {verdict}"
                )
                if first
                else "〃 | 〃 | 〃 | 〃 | 〃"
            )
            L.append(
                f"| {storage} | {label} | {fmt_s(a)} | {fmt_s(b)} | {fmt_ratio(sp)} | "
                f"{'–' if sp is None else ('yes' if sp >= TARGET_SPEEDUP else 'NO')} | "
                f"{floor_cells if row == floor_row else '– | –'} | {mem} |"
            )
    L.append("")

    # Per workload
    for storage, workload in combos:
        if workload in RULES_WORKLOADS:
            report_rules(L, data, storage, problems, workload)
            continue
        L.append(f"## {storage}: {workload}")
        L.append("")
        L.append(f"Summary figure: {HEADLINE[workload]}.")
        L.append("")
        es = {i: entries.get(entry_key(storage, workload, i)) for i in IMPLS}
        ss = {i: ((es[i] or {}).get("summary") or {}) for i in IMPLS}
        # A floor column where its phases mean what the sides' do (values_all: the two passes
        # over the event files); floor_metadata's phases match none of metadata's, so there
        # the floor has its line under the table only.
        fs = {}
        if storage == "local" and workload == "values_all":
            fs = (entries.get(entry_key(storage, workload, FLOOR)) or {}).get("summary") or {}
        L.append("| phase | smdebug s | ours s | smdebug / ours |" + (" floor s |" if fs else ""))
        L.append("|---|---:|---:|---:|" + ("---:|" if fs else ""))
        total = "everything after the import"
        if "checksum_s" in PHASES[workload]:
            total += " but the checksum: create_trial + list + reads"
        rows = [(f"**total** ({total})", "total_s", None)]
        labels = {
            "checksum_s": "checksum (timed apart, not in reads)",
            "pass1": "pass1 (reads)",
            "pass2": "pass2 (reads)",
        }
        rows += [(labels.get(p, p), None, p) for p in PHASES[workload]]
        if fs:  # the floor's counterpart of create_trial + list
            rows.insert(2, ("index (floor only: index files read + parsed)", None, "index"))
        rows += [("peak RSS, MiB", "peak_rss_mib", None)]
        floor_phases = ("index", "pass1", "pass2", "reads")
        for label, key, phase in rows:
            vals = []
            for i in IMPLS:
                s = ss[i]
                vals.append(s.get(key) if key else (s.get("phases") or {}).get(phase))
            fv = None
            if fs:
                fv = fs.get(key) if key else (fs.get("phases") or {}).get(phase)
                if phase and phase not in floor_phases:
                    fv = None
                if phase == "index":
                    vals = [None, None]
            if all(v is None for v in vals) and fv is None:
                continue
            L.append(
                f"| {label} | {fmt_s(vals[0])} | {fmt_s(vals[1])} | {fmt_ratio(ratio(vals[0], vals[1]))} |"
                + (f" {fmt_s(fv)} |" if fs else "")
            )
        L.append("")
        for i in IMPLS:
            e = es[i]
            line = f"- {i}: {side_status(e, data.get('ours_unavailable') if i == 'ours' else None)}"
            if e and e.get("summary"):
                runs = [r for r in e["runs"] if "error" not in r]
                line += (
                    "; total per run: " + ", ".join(fmt_s(r.get("total_s")) for r in runs) + " s"
                )
                line += load_and_cpu(runs)
                line += f"; checksum `{e['summary']['checksums'][0]}`"
                if i == "ours" and (e.get("git") or {}).get("commit"):
                    line += f"; commit {e['git']['commit']}{' (dirty)' if e['git'].get('dirty') else ''}"
            L.append(line)
        fl = floor_line(data, storage, workload, problems)
        if fl:
            L.append(fl)
        verdict, _ = compare(entries, storage, workload)
        L.append(f"- values read by both: **{verdict}**")
        if es["smdebug"] and es["ours"] and ss["smdebug"] and ss["ours"]:
            same = same_run(es["smdebug"], es["ours"])
            L.append(
                "- both sides measured in the same run (alternating)"
                if same
                else "- the two sides were measured in **separate runs**: the machine's load may differ "
                "(`--impl both` measures them together)"
            )
        if storage == "s3":
            for i in IMPLS:
                a = ((es[i] or {}).get("summary") or {}).get("checksums")
                b = ((entries.get(entry_key("local", workload, i)) or {}).get("summary") or {}).get(
                    "checksums"
                )
                if a and b:
                    same = a == b
                    L.append(
                        f"- {i}: S3 values {'identical to' if same else 'DIFFERENT from'} its local run"
                    )
                    if not same:
                        problems.append(f"s3/{workload}/{i}: values differ from the local run")
        L.append("")

    report_requests(L, data, problems)
    report_live(L, data)
    report_s3_cpu(L, data, problems)
    # The scale workloads (bench/many_workers.py, bench/large_tensors.py) keep their own
    # section file, which each rewrites after its run; it is copied in as it is.
    if os.path.exists(SCALE_MD):
        with open(SCALE_MD) as f:
            L.extend(f.read().rstrip("\n").splitlines())
        L.append("")

    # Machine
    L.append("## Machine and software")
    L.append("")
    envs = {}
    for i in IMPLS:
        for k, e in sorted(entries.items()):
            if k.endswith("/" + i) and e.get("env"):
                envs[i] = e["env"]
                break
    L.append("| | smdebug side | ours side |")
    L.append("|---|---|---|")
    for label, key in (
        ("library", "impl_version"),
        ("python", "python"),
        ("numpy", "numpy"),
        ("protobuf", "protobuf"),
        ("protobuf implementation", "protobuf_impl"),
        ("nproc", "nproc"),
        ("CPU", "cpu"),
        ("platform", "platform"),
        ("interpreter", "executable"),
    ):
        vals = []
        for i in IMPLS:
            v = (envs.get(i) or {}).get(key)
            if key == "executable" and v:
                v = f"`{rel(v)}`"
            vals.append("–" if v is None else str(v))
        L.append(f"| {label} | {vals[0]} | {vals[1]} |")
    if len(envs) == 2 and (envs["smdebug"].get("cpu"), envs["smdebug"].get("nproc")) != (
        envs["ours"].get("cpu"),
        envs["ours"].get("nproc"),
    ):
        L.append("")
        L.append(
            "**Warning:** the two sides were measured on different machines; the ratios are not meaningful."
        )
    L.append("")

    # Reproduce
    L.append("## Reproduce")
    L.append("")
    L.append(
        "From the repository root (the runner creates `bench/.work/venv-smdebug` and the trial if missing):"
    )
    L.append("")
    L.append("```sh")
    cmds = []
    others = [e for sect in ("requests", "live") for _, e in sorted((data.get(sect) or {}).items())]
    others += [data["s3_cpu"]] if data.get("s3_cpu") else []
    for e in [entries[k] for k in sorted(entries)] + others:
        c = e.get("command")
        if c and c not in cmds:
            cmds.append(c)
    if not cmds:
        cmds = [".venv/bin/python bench/run.py"]
    L.extend(cmds)
    L.append("```")
    L.append("")
    L.append("One workload by hand (prints its JSON line):")
    L.append("")
    L.append("```sh")
    t = trial.get("path") or rel(make_trial.DEFAULT_OUT)
    L.append(
        f"{rel(SMDEBUG_PY)} bench/workloads.py --impl smdebug --trial {t} --workload values100"
    )
    L.append(f".venv/bin/python bench/workloads.py --impl ours --trial {t} --workload values100")
    L.append(f"{rel(SMDEBUG_PY)} bench/rules_workload.py --impl smdebug --trial {t}")
    L.append(f".venv/bin/python bench/rules_workload.py --impl ours --trial {t}")
    tm = ((data.get("trials") or {}).get("mixed") or {}).get("path")
    if tm:
        L.append(f"{rel(SMDEBUG_PY)} bench/rules_workload.py --impl smdebug --trial {tm}")
        L.append(f".venv/bin/python bench/rules_workload.py --impl ours --trial {tm}")
    L.append("```")
    L.append("")
    if problems:
        L.append("## Problems")
        L.append("")
        L.extend(f"- {p}" for p in problems)
        L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))
    return problems


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTEST_CURRENT_TEST"):
        print(
            "bench/run.py is a benchmark; it is never run or timed inside the test suite",
            file=sys.stderr,
        )
        return 2
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

    storage = "s3" if args.s3 else "local"
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
    mixed_params: dict = {}
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
            target = f"s3://{S3_BUCKET}/{prefix}"
        else:
            if any(w != RULES_MIXED_WORKLOAD for w in workloads):
                warm_page_cache(trial)
            if RULES_MIXED_WORKLOAD in workloads:
                warm_page_cache(mixed_trial)

        for workload in workloads:
            if moto and not args.no_requests and args.requests_only:
                count_requests(
                    data,
                    impls,
                    pythons,
                    target,
                    workload,
                    moto,
                    args,
                    command,
                    run_id,
                    git,
                    failures,
                )
                continue
            # The floor is ours' yardstick: a third side whenever ours runs a local workload
            # that has one (same loop, same repeats, ours' interpreter).
            sides = list(impls)
            if not moto and "ours" in impls and workload in FLOOR_OF:
                sides.append(FLOOR)
            runs: dict[str, list[dict]] = {i: [] for i in sides}
            on = mixed_trial if workload == RULES_MIXED_WORKLOAD else target
            for rep in range(args.repeat):
                for impl in sides:  # alternate the sides so that drift hits them alike
                    log(f"{storage} {workload} {impl} run {rep + 1}/{args.repeat}")
                    if impl == FLOOR:
                        r = run_one(
                            args.ours_python, "ours", on, FLOOR_OF[workload], env, args.timeout
                        )
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
            for impl in sides:
                ok = [r for r in runs[impl] if "error" not in r]
                entry = {
                    "impl": impl,
                    "storage": storage,
                    "workload": workload,
                    **({"floor_workload": FLOOR_OF[workload]} if impl == FLOOR else {}),
                    "measured_at": now_iso(),
                    "run_id": run_id,
                    "command": command,
                    "trial": target if moto else rel(on),
                    "env": ok[0]["env"] if ok else None,
                    "git": git if impl in ("ours", FLOOR) else None,
                    "trial_params": mixed_params if workload == RULES_MIXED_WORKLOAD else params,
                    "runs": [{k: v for k, v in r.items() if k != "env"} for r in runs[impl]],
                    "summary": summarize(runs[impl]),
                }
                if len(ok) < len(runs[impl]):
                    entry["error"] = next(r["error"] for r in runs[impl] if "error" in r)
                    failures.append(
                        f"{storage}/{workload}/{impl}: {entry['error'].splitlines()[0]}"
                    )
                data["entries"][entry_key(storage, workload, impl)] = entry
            save_results(args.results, data)
            if moto and not args.no_requests:
                count_requests(
                    data,
                    impls,
                    pythons,
                    target,
                    workload,
                    moto,
                    args,
                    command,
                    run_id,
                    git,
                    failures,
                )
    finally:
        if moto:
            moto.__exit__(None, None, None)

    save_results(args.results, data)
    problems = write_report(data, args.report, args.results)
    log(f"wrote {rel(args.results)} and {rel(args.report)}")
    for f in failures + problems:
        log(f"PROBLEM: {f}")
    return 1 if failures or problems else 0


if __name__ == "__main__":
    sys.exit(main())
