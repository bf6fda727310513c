"""RESULTS.md's S3 request counts and live latency sections."""

from __future__ import annotations

import statistics
from typing import Any

from workloads import S3_WORKLOADS

from runner.common import IMPLS
from runner.report_figures import KIND_LABELS
from runner.results import entry_key


def report_requests(L: list[str], data: dict[str, Any], problems: list[str]) -> None:
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


def report_live(L: list[str], data: dict[str, Any]) -> None:
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
