"""Live latency (``--live``, bench/live.py): a writer uploads steps to a moto server at a steady
pace while a reader waits for each (``wait_for_steps``); the lag from upload to read, per side."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from typing import Any

from runner.common import HERE, REPO, SMDEBUG_PY, WORK, log, now_iso, rel
from runner.live_process import LineQueue, stop_process, tail_of, wait_event
from runner.moto import MotoServer
from runner.report import write_report
from runner.results import save_results
from runner.sides import git_state


def percentile(xs: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default); ``xs`` not empty."""
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def run_live_once(
    impl: str,
    reader_py: str,
    writer_py: str,
    moto: MotoServer,
    opts: argparse.Namespace,
    run_no: int,
) -> dict[str, Any]:
    """One live run: returns per-step latencies (seconds) and the raw timestamps' summary."""
    bucket = "bench-live"
    prefix = f"live-{impl}-{int(time.time())}-{run_no}"
    env = moto.env()
    live_py = os.path.join(HERE, "live.py")
    wlog_path = os.path.join(WORK, f"live_writer_{impl}.log")
    rlog_path = os.path.join(WORK, f"live_reader_{impl}.log")
    writer = reader = None
    wmsgs: list[dict[str, Any]] = []
    rmsgs: list[dict[str, Any]] = []
    result: dict[str, Any] = {"bucket": bucket, "prefix": prefix}
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
            assert writer.stdout is not None and writer.stdin is not None  # both PIPE
            wq = LineQueue(writer.stdout)
            ready = wait_event(wq, "ready", 120, wmsgs)
            if not ready or ready.get("event") != "ready":
                return dict(result, error=f"writer not ready: {ready or tail_of(wlog_path)}")
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
            assert reader.stdout is not None  # PIPE
            rq = LineQueue(reader.stdout)
            ready = wait_event(rq, "ready", 120, rmsgs)
            if not ready or ready.get("event") != "ready":
                return dict(result, error=f"reader not ready: {ready or tail_of(rlog_path)}")
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
            stop_process(reader)
            # the writer ends on its own after the end marker; give it a moment, then stop it
            if writer is not None:
                try:
                    writer.wait(opts.live_end_delay + 15)
                except subprocess.TimeoutExpired:
                    stop_process(writer)

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
            + (f"; reader log: {tail_of(rlog_path, 4)}" if tail_of(rlog_path, 4) else "")
        )
    return result


def summarize_live(runs: list[dict[str, Any]], poll: float) -> dict[str, Any]:
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


def live_main(
    args: argparse.Namespace, data: dict[str, Any], impls: list[str], command: str
) -> int:
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
