"""The scale section of bench/RESULTS.md, from bench/results_scale.json.

``bench/many_workers.py``, ``bench/large_tensors.py`` and ``bench/user_rules.py`` store their
figures in ``bench/results_scale.json`` (under ``many_workers``, ``large_tensors`` and
``user_rules``; ``bench/tb_log.py`` its own under ``tensorboard``, rendered by itself) and call
``write_section()``, which renders ``bench/results_scale.md``; ``bench/run.py`` copies that file
into RESULTS.md whenever it writes it (``.venv/bin/python bench/run.py --report-only``).
"""

from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results_scale.json")
SECTION = os.path.join(HERE, "results_scale.md")


def load() -> dict:
    if not os.path.exists(RESULTS):
        return {}
    with open(RESULTS) as f:
        return dict(json.load(f))


def store(key: str, figures: dict) -> None:
    """Keep ``figures`` under ``key`` and rewrite the section."""
    data = load()
    data[key] = figures
    with open(RESULTS, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    write_section(data)


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys against xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _load(value: object) -> str:
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        return " before, ".join(_load(v) for v in value[:2]) + " after"
    if isinstance(value, (list, tuple)):
        return " / ".join(f"{v:.1f}" for v in value) + " (1, 5, 15 min)"
    return str(value)


def many_workers_lines(mw: dict) -> list[str]:
    lines = [
        "## Scale: many workers",
        "",
        "`bench/many_workers.py`: open a trial of W workers x S steps (one index file and one "
        "event file per step and worker) in a fresh process and answer `steps()`, `workers()`, "
        "`tensor_names()`; seconds (wall and the process's CPU) and peak resident memory above "
        "what the imports took. On S3 the trial is served by moto in the benchmark's process, "
        "so the wall time is mostly moto's (about 9 ms per GET on this machine); the CPU "
        f"seconds are ours. Machine load average at the end of the run: {_load(mw.get('load'))}.",
        "",
        "| storage | workers x steps | index files | open s (wall) | CPU s | peak MiB above imports |",
        "|---|---|---|---|---|---|",
    ]
    for storage in ("local", "s3"):
        for r in mw.get(storage, []):
            lines.append(
                f"| {storage} | {r['workers_asked']} x {r['steps_asked']} "
                f"| {r['index_files']:,} | {r['seconds']:.2f} | {r['cpu_s']:.2f} "
                f"| {r['peak_above_mib']:.1f} |"
            )
    lines.append("")
    for storage in ("local", "s3"):
        rows = mw.get(storage, [])
        if len(rows) < 2:
            continue
        files = [r["index_files"] / 1000 for r in rows]
        per = {
            k: slope(files, [r[k] for r in rows]) for k in ("seconds", "cpu_s", "peak_above_mib")
        }
        largest = rows[-1]
        k = largest["index_files"] / 1000
        lines.append(
            f"- **{storage}**: per 1,000 index files **{per['peak_above_mib']:.2f} MiB**, "
            f"**{per['cpu_s']:.3f} s CPU**, {per['seconds']:.3f} s wall (least-squares slopes over "
            f"{len(rows)} sizes); the largest, {largest['workers_asked']} x "
            f"{largest['steps_asked']}: {largest['peak_above_mib'] / k:.2f} MiB, "
            f"{largest['cpu_s'] / k:.3f} s CPU, {largest['seconds'] / k:.3f} s wall per 1,000."
        )
    if mw.get("note"):
        lines.append(f"- {mw['note']}")
    lines.append("")
    return lines


_LT_SIDES = {
    "ours": "ours (read-ahead in a second thread, the default)",
    "ours-serial": "ours, `prefetch_steps=0` (one thread)",
    "smdebug": "smdebug 1.0.34",
    "floor": "floor: each body reads each step's event file once",
    "floor-once": "floor-once: each event file read once in the whole run",
    "floor-reopen": "floor-reopen (before issue 42): the event file opened for every value",
}


def large_tensors_lines(lt: dict) -> list[str]:
    sides = [s for s in lt.get("sides", ["ours", "floor"]) if s in lt]
    lines = [
        "## Scale: large tensors",
        "",
        f"`bench/large_tensors.py` (issue 28): {lt['steps']} steps x (4 gradients + 4 weights "
        "of float32[1,000,000], 4 MB each, + loss), one worker, written by smdebug 1.0.34's "
        "own writer; three user-style rule bodies (VanishingGradient, ExplodingTensor, "
        "WeightUpdateRatio) through each reader's Trial API, and with no reader at all (the "
        "floors, bench/large_floor.py: one open and one read of a step's event file into a "
        "buffer of their own, every record framed, `numpy.frombuffer` of the tensors the body "
        "needs, the same numpy work, one thread; `floor` walks the steps once per body, "
        "`floor-once` once for all three). Medians of "
        f"{lt['repeat']} fresh-process runs per side, alternating; answers equal: "
        f"{'yes' if lt['same'] else '**no**'}. Load average: {_load(lt.get('load'))} "
        f"on {lt.get('nproc', '?')} cores.",
        "",
        "| side | open s | VanishingGradient s | ExplodingTensor s | WeightUpdateRatio s "
        "| rules s | / floor | process CPU s | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for side in sides:
        f = lt[side]
        ratio = lt.get(f"ratio_{side}", lt.get("ratio_rules") if side == "ours" else None)
        if side.startswith("floor") and side != "floor" and "floor" in lt:
            ratio = f["rules"] / lt["floor"]["rules"]
        lines.append(
            f"| {_LT_SIDES.get(side, side)} | {f['open']:.3f} | {f['VanishingGradient']:.3f} | "
            f"{f['ExplodingTensor']:.3f} | {f['WeightUpdateRatio']:.3f} | {f['rules']:.3f} "
            f"| {'–' if ratio is None else f'{ratio:.2f}x'} | {f.get('cpu_s', '–')} "
            f"| {f['peak_rss_mib']:.0f} |"
        )
    lines.append("")
    if "ratio_ours" in lt:
        once = lt.get("ratio_ours_floor-once")
        lines.append(
            f"- ours / floor over the three bodies: **{lt['ratio_ours']:.2f}x** (issue 42's "
            "target: at most 1.5x)"
            + (f"; ours / floor-once: **{once:.2f}x**" if once is not None else "")
            + (
                f"; process CPU ours / floor: {lt['ratio_ours_cpu']:.2f}x."
                if "ratio_ours_cpu" in lt
                else "."
            )
        )
    if "smdebug" in lt and "ours" in lt:
        speedup = lt["smdebug"]["rules"] / lt["ours"]["rules"]
        lines.append(f"- smdebug / ours over the three bodies: **{speedup:.1f}x**.")
    if "ours-serial" in lt and "ours" in lt:
        gain = lt["ours-serial"]["rules"] / lt["ours"]["rules"]
        lines.append(
            f"- The second core (records of the next step read ahead in a thread): ours-serial / "
            f"ours = **{gain:.2f}x**."
        )
    if lt.get("note"):
        lines.append(f"- {lt['note']}")
    lines.append("")
    return lines


def user_rules_lines(u: dict) -> list[str]:
    """Issue 42's user-rule workload (bench/user_rules.py)."""
    names = {
        "smdebug": "smdebug 1.0.34",
        "ours": "ours",
        "ours-on": "ours, read charts on (beside off)",
        "ours-off": "ours, read charts off",
    }
    lines = [
        "## User-style rules through `smdebug.rules.invoke_rule` (issue 42)",
        "",
        "`bench/user_rules.py`: VanishingGradient, ExplodingTensor, AllZero, WeightUpdateRatio "
        "and LossNotDecreasing written as users write them for smdebug "
        "(bench/user_rule_bodies.py, smdebug's names only), run on the 2000 x 50 x float32[256] "
        "trial by one script under each side's interpreter: the real smdebug 1.0.34, ours "
        "(the `smdebug` import names our package installs; every rule charts what it reads for "
        "its report, as in the evaluator), and ours with `Evidence.watch_reads` a no-op (no "
        "read charts; reads still counted). The figure is the **process**: wall time and CPU "
        "(user + system) measured by the parent around a fresh process, imports included. "
        f"Medians of {u['repeat']} runs per side: smdebug and ours alternating, then, after "
        "one run not counted, ours with the read charts on and off alternating A B B A (a "
        "process that follows smdebug's minute of CPU runs slower: bench/user_rules.py); "
        f"fired steps equal on every side: {'yes' if u['same'] else '**no**'}. Load average: "
        f"{_load(u.get('load'))} on {u.get('nproc', '?')} cores.",
        "",
        "| side | process wall s | process CPU s | import s | VanishingGradient CPU s "
        "| ExplodingTensor | AllZero | WeightUpdateRatio | LossNotDecreasing | runs (wall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for side in u.get("sides", []):
        f = u[side]
        r = f["rules_cpu_s"]
        lines.append(
            f"| {names.get(side, side)} | {f['wall_s']:.2f} | {f['cpu_s']:.2f} | "
            f"{f['import_s']:.2f} | "
            + " | ".join(f"{r.get(n, 0):.3f}" for n in _USER_RULES)
            + f" | {', '.join(f'{w:.2f}' for w in f['walls'])} |"
        )
    lines.append("")
    if "speedup_wall" in u:
        lines.append(
            f"- smdebug / ours, process wall: **{u['speedup_wall']:.1f}x** (target: at least "
            f"10x); process CPU: {u['speedup_cpu']:.1f}x."
        )
    lines += _recording_lines(u)
    if u.get("note"):
        lines.append(f"- {u['note']}")
    lines.append("")
    return lines


def _recording_lines(u: dict) -> list[str]:
    """The read charts' cost: side by side (the figure against the target when measured),
    then the processes one after the other."""
    lines = []
    pairs = u.get("recording_side_by_side")
    if pairs:
        spread = pairs["rules_cpu_pairs"]
        lines.append(
            "- read charts on / off, side by side (the two processes at once, each pinned to a "
            "core of its own, one BLAS thread each: both see the same state of the machine; "
            f"{pairs['pairs']} pairs): the rule bodies' CPU **{pairs['rules_cpu']:.3f}** "
            f"(median of the pairs; {min(spread):.3f} to {max(spread):.3f}), the process CPU "
            f"**{pairs['process_cpu']:.3f}** (target: at most 1.05)."
        )
    if "recording_cost_cpu" in u:
        target = "" if pairs else " (target: at most 1.05)"
        lines.append(
            "- read charts on / off, the processes one after the other (A B B A; on this VM "
            "the same process takes 10 % more or less from one run to the next): CPU "
            f"{u['recording_cost_cpu']:.3f}, wall {u['recording_cost_wall']:.3f}{target}; the "
            "median of each pair's own ratio: CPU "
            f"{u['recording_cost_cpu_paired']:.3f}, wall {u['recording_cost_wall_paired']:.3f}; "
            "the rule bodies' CPU alone (`time.process_time()` around each `invoke_rule`, "
            f"summed over the five rules): {u['recording_cost_rules_cpu']:.3f} (medians), "
            f"{u['recording_cost_rules_cpu_paired']:.3f} (median of the pairs)."
        )
    return lines


def recording_instructions_lines(ri: dict) -> list[str]:
    """The read charts' cost in instructions (bench/recording_instructions.py)."""
    n = ri["instructions"]
    return [
        f"Counted in instructions (`bench/recording_instructions.py`: one process per side under "
        f"valgrind's callgrind, `PYTHONHASHSEED=0`; the load does not move a count) for "
        f"{', '.join(ri['rules'])}: read charts on {n['on']:,}, off {n['off']:,}, no rule "
        f"(imports and the trial's opening) {n['none']:,}; the rule bodies' own, on / off: "
        f"**{ri['recording_cost_instructions']:.3f}**. Instructions are not time (a cache miss "
        "counts once; the target, at most 1.05, is one of time); the side with the charts on "
        "holds the recent step about 50 times as often as outside valgrind.",
        "",
    ]


_USER_RULES = (
    "VanishingGradient",
    "ExplodingTensor",
    "AllZero",
    "WeightUpdateRatio",
    "LossNotDecreasing",
)


def speed_path_lines(sp: dict) -> list[str]:
    """Issue 27's before/after of the value-read speed path: the same workloads of run.py,
    on main's code and on the branch's, in one session (``sp``: see bench/RESULTS.md)."""
    lines = [
        "## The value-read speed path: before and after (issue 27)",
        "",
        f"{sp['what']} Load average (1 min) before and after each run is given: the machine "
        "was shared, so process CPU is the steadier figure.",
        "",
        "| workload | figure | before (main) | after | after / before | CPU s before | CPU s after "
        "| load before | load after | same answers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sp["rows"]:
        b, a = row["before"], row["after"]
        lines.append(
            f"| {row['workload']} | {row['figure']} | {b['seconds']:.3f} | {a['seconds']:.3f} "
            f"| {a['seconds'] / b['seconds']:.2f}x | {b['cpu_s']:.2f} | {a['cpu_s']:.2f} "
            f"| {b['load']} | {a['load']} | {'yes' if row['same'] else '**no**'} |"
        )
    lines.append("")
    for note in sp.get("notes", []):
        lines.append(f"- {note}")
    lines.append("")
    return lines


def write_section(data: dict | None = None) -> None:
    data = load() if data is None else data
    lines: list[str] = []
    if "many_workers" in data:
        lines += many_workers_lines(data["many_workers"])
    if "user_rules" in data:
        lines += user_rules_lines(data["user_rules"])
    if "recording_instructions" in data:
        lines += recording_instructions_lines(data["recording_instructions"])
    if "large_tensors" in data:
        lines += large_tensors_lines(data["large_tensors"])
    if "speed_path" in data:
        lines += speed_path_lines(data["speed_path"])
    with open(SECTION, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


if __name__ == "__main__":
    write_section()
    print(open(SECTION).read())
