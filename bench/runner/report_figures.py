"""The figures of RESULTS.md: seconds and ratios as text, the load/CPU line of a set of runs,
the floor comparison (ours / floor), whether two entries come from the same run, and a side's
status."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from runner.common import FLOOR, FLOOR_OF
from runner.results import entry_key


def fmt_s(x: float | None) -> str:
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


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "–"
    if r >= 1000:
        return "> 1000x"
    return f"{r:.1f}x" if r >= 10 else f"{r:.2f}x"


def fmt_floor_ratio(r: float | None) -> str:
    return "–" if r is None else f"{r:.1f}x"


def load_and_cpu(runs: list[dict[str, Any]]) -> str:
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


def floor_figures(entries: dict[str, Any], storage: str, workload: str) -> dict[str, Any] | None:
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
    out: dict[str, Any] = {"entry": fe or None, "floor_s": None, "ours_s": None, "ratio": None}
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


def floor_line(
    data: dict[str, Any], storage: str, workload: str, problems: list[str]
) -> str | None:
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


def same_run(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.get("run_id") or b.get("run_id"):
        return a.get("run_id") == b.get("run_id")
    if a.get("command") != b.get("command"):
        return False
    try:
        ta, tb = (_dt.datetime.strptime(e["measured_at"], "%Y-%m-%dT%H:%M:%SZ") for e in (a, b))
    except (KeyError, ValueError):
        return False
    return abs((ta - tb).total_seconds()) < 3600


def side_status(e: dict[str, Any] | None, unavailable: dict[str, Any] | None = None) -> str:
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
