"""The scale section of bench/RESULTS.md, from bench/results_scale.json.

``bench/many_workers.py`` and ``bench/large_tensors.py`` store their figures in
``bench/results_scale.json`` (under ``many_workers`` and ``large_tensors``) and call
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
    "floor": "floor (no reader)",
}


def large_tensors_lines(lt: dict) -> list[str]:
    sides = [s for s in lt.get("sides", ["ours", "floor"]) if s in lt]
    lines = [
        "## Scale: large tensors",
        "",
        f"`bench/large_tensors.py` (issue 28): {lt['steps']} steps x (4 gradients + 4 weights "
        "of float32[1,000,000], 4 MB each, + loss), one worker, written by smdebug 1.0.34's "
        "own writer; three user-style rule bodies (VanishingGradient, ExplodingTensor, "
        "WeightUpdateRatio) through each reader's Trial API, and with no reader at all (floor: "
        "read the record, frame it, `numpy.frombuffer`, the same numpy work). Medians of "
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
        lines.append(
            f"| {_LT_SIDES.get(side, side)} | {f['open']:.3f} | {f['VanishingGradient']:.3f} | "
            f"{f['ExplodingTensor']:.3f} | {f['WeightUpdateRatio']:.3f} | {f['rules']:.3f} "
            f"| {'–' if ratio is None else f'{ratio:.2f}x'} | {f.get('cpu_s', '–')} "
            f"| {f['peak_rss_mib']:.0f} |"
        )
    lines.append("")
    if "ratio_ours" in lt:
        lines.append(
            f"- ours / floor over the three bodies: **{lt['ratio_ours']:.2f}x** (target: at "
            "most 1.2x)."
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
    if "large_tensors" in data:
        lines += large_tensors_lines(data["large_tensors"])
    if "speed_path" in data:
        lines += speed_path_lines(data["speed_path"])
    with open(SECTION, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


if __name__ == "__main__":
    write_section()
    print(open(SECTION).read())
