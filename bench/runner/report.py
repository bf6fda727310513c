"""RESULTS.md, written from results.json: the summary table, one section per workload, the
floors, S3 request counts, live latency, S3 client CPU, the rules workloads, the scale section
(bench/results_scale.md) and the problems found."""

from __future__ import annotations

import os
from typing import Any

import make_trial
from s3_cpu_run import report_s3_cpu

from runner.common import (
    FLOOR,
    HEADLINE,
    IMPLS,
    LOCAL_WORKLOADS,
    PHASES,
    RESULTS_JSON,
    RULES_WORKLOADS,
    SCALE_MD,
    SMDEBUG_PY,
    TARGET_SPEEDUP,
    now_iso,
    rel,
)
from runner.kept_sections import kept_sections
from runner.report_figures import (
    floor_figures,
    floor_line,
    fmt_floor_ratio,
    fmt_ratio,
    fmt_s,
    load_and_cpu,
    ratio,
    same_run,
    side_status,
)
from runner.report_rules import report_rules, rules_common, rules_compare
from runner.report_sections import report_live, report_requests
from runner.results import entry_key


def compare(entries: dict[str, Any], storage: str, workload: str) -> tuple[str, bool]:
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


def write_report(data: dict[str, Any], path: str, results_path: str = RESULTS_JSON) -> list[str]:
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

    combos: list[tuple[str, str]] = []  # (storage, workload) with figures
    for storage in ("local", "s3"):
        for workload in LOCAL_WORKLOADS:
            if any(entry_key(storage, workload, i) in entries for i in IMPLS):
                combos.append((storage, workload))
    _summary(L, entries, combos, problems)
    _per_workload(L, data, combos, problems)
    report_requests(L, data, problems)
    report_live(L, data)
    report_s3_cpu(L, data, problems)
    # The scale workloads (bench/many_workers.py, bench/large_tensors.py) keep their own
    # section file, which each rewrites after its run; it is copied in as it is.
    if os.path.exists(SCALE_MD):
        with open(SCALE_MD) as f:
            L.extend(f.read().rstrip("\n").splitlines())
        L.append("")

    L.extend(kept_sections(path, L))
    _machine(L, entries)
    _reproduce(L, data, trial)
    if problems:
        L.append("## Problems")
        L.append("")
        L.extend(f"- {p}" for p in problems)
        L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))
    return problems


def _summary(
    L: list[str], entries: dict[str, Any], combos: list[tuple[str, str]], problems: list[str]
) -> None:
    """The summary table: one row per storage and workload (and the floors)."""
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


def _per_workload(
    L: list[str], data: dict[str, Any], combos: list[tuple[str, str]], problems: list[str]
) -> None:
    """One section per storage and workload: the phases of both sides, the values compared."""
    entries = data["entries"]
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
        fs: dict[str, Any] = {}
        if storage == "local" and workload == "values_all":
            fs = (entries.get(entry_key(storage, workload, FLOOR)) or {}).get("summary") or {}
        L.append("| phase | smdebug s | ours s | smdebug / ours |" + (" floor s |" if fs else ""))
        L.append("|---|---:|---:|---:|" + ("---:|" if fs else ""))
        total = "everything after the import"
        if "checksum_s" in PHASES[workload]:
            total += " but the checksum: create_trial + list + reads"
        rows: list[tuple[str, str | None, str | None]] = [(f"**total** ({total})", "total_s", None)]
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


def _machine(L: list[str], entries: dict[str, Any]) -> None:
    """What each side ran on: library, Python, numpy, protobuf, CPU, platform."""
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


def _reproduce(L: list[str], data: dict[str, Any], trial: dict[str, Any]) -> None:
    """The command lines that produced the stored figures, and one workload by hand."""
    entries = data["entries"]
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
