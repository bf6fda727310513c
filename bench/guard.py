"""Benchmark guard (issue 42): run the rule workloads, each with both sides in one run, and
compare each workload's ratios with the figures committed before (never seconds: the machine
is shared), saying which moved.

    .venv/bin/python bench/guard.py                     # run all five, compare with HEAD
    .venv/bin/python bench/guard.py --workloads user_rules,large_tensors
    .venv/bin/python bench/guard.py --compare-only      # no run: the working tree's figures
    .venv/bin/python bench/guard.py --against main      # compare with another revision

The workloads and the command each runs (each stores its figures as it always does):

* ``rules``: ``bench/run.py --workloads rules --repeat 1`` (every built-in rule, big trial);
* ``rules_mixed``: ``bench/run.py --workloads rules_mixed --repeat 1`` (the rules trial);
* ``user_rules``: ``bench/user_rules.py`` (five user-style rules through
  ``smdebug.rules.invoke_rule``; smdebug, ours, ours with the read charts off);
* ``large_tensors``: ``bench/large_tensors.py`` (ours against the floors and smdebug);
* ``tensorboard``: ``bench/tb_log.py`` (ours against TensorBoard's EventAccumulator).

The figures compared are ratios of sides measured in the same run: speed-ups (smdebug or
TensorBoard / ours), memory ratios, ours / floor, recording on / off. A figure moved when it
changed by more than ``--tolerance`` (10 %) either way; the output says whether for the
better or the worse. Exit status 1 when a run failed or a figure moved for the worse. About
15 minutes for all five on the 2-core machine (smdebug's side of ``rules`` is most of it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = os.path.join(REPO, ".venv", "bin", "python")
sys.path.insert(0, HERE)

COMMANDS: dict[str, list[str]] = {
    "rules": ["bench/run.py", "--workloads", "rules", "--repeat", "1"],
    "rules_mixed": ["bench/run.py", "--workloads", "rules_mixed", "--repeat", "1"],
    "user_rules": ["bench/user_rules.py", "--repeat", "3"],
    "large_tensors": ["bench/large_tensors.py", "--repeat", "3"],
    "tensorboard": ["bench/tb_log.py"],
}
FILES = ("bench/results.json", "bench/results_scale.json")

Figures = dict[str, float | None]


def _ratio(a: Any, b: Any) -> float | None:
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def _rules(workload: str) -> Callable[[dict, dict], Figures]:
    def figures(results: dict, _scale: dict) -> Figures:
        from runner.report_rules import rules_common

        entries = results.get("entries", {})
        common = rules_common(entries, "local", workload)
        peak = {
            i: (entries.get(f"local/{workload}/{i}") or {}).get("summary", {}).get("peak_rss_mib")
            for i in ("smdebug", "ours")
        }
        return {
            "speed-up (smdebug / ours, higher is better)": _ratio(
                common.get("smdebug"), common.get("ours")
            ),
            "memory (smdebug / ours peak, higher is better)": _ratio(peak["smdebug"], peak["ours"]),
        }

    return figures


def _user_rules(_results: dict, scale: dict) -> Figures:
    u = scale.get("user_rules", {})
    return {
        "speed-up, process wall (higher is better)": u.get("speedup_wall"),
        "speed-up, process CPU (higher is better)": u.get("speedup_cpu"),
        "recording on / off, CPU (lower is better)": u.get("recording_cost_cpu"),
        "recording on / off, wall (lower is better)": u.get("recording_cost_wall"),
        "recording on / off, rule bodies' CPU (lower is better)": u.get("recording_cost_rules_cpu"),
        "recording on / off side by side, rule bodies' CPU (lower is better)": (
            u.get("recording_side_by_side") or {}
        ).get("rules_cpu"),
    }


def _large(_results: dict, scale: dict) -> Figures:
    lt = scale.get("large_tensors", {})
    return {
        "ours / floor (lower is better)": lt.get("ratio_ours"),
        "ours / floor-once (lower is better)": lt.get("ratio_ours_floor-once"),
        "speed-up smdebug / ours (higher is better)": _ratio(
            lt.get("smdebug", {}).get("rules"), lt.get("ours", {}).get("rules")
        ),
    }


def _tensorboard(_results: dict, scale: dict) -> Figures:
    tb = scale.get("tensorboard", {})
    return {
        "speed-up, CPU (higher is better)": tb.get("speedup_cpu"),
        "memory (higher is better)": tb.get("memory_ratio"),
    }


EXTRACT: dict[str, Callable[[dict, dict], Figures]] = {
    "rules": _rules("rules"),
    "rules_mixed": _rules("rules_mixed"),
    "user_rules": _user_rules,
    "large_tensors": _large,
    "tensorboard": _tensorboard,
}


def _load(revision: str | None) -> tuple[dict, dict]:
    """results.json and results_scale.json at ``revision`` (None: the working tree)."""
    out = []
    for path in FILES:
        if revision is None:
            full = os.path.join(REPO, path)
            text = open(full).read() if os.path.exists(full) else "{}"
        else:
            done = subprocess.run(
                ["git", "-C", REPO, "show", f"{revision}:{path}"], capture_output=True, text=True
            )
            text = done.stdout if done.returncode == 0 else "{}"
        out.append(json.loads(text))
    return out[0], out[1]


def compare(workloads: list[str], against: str, tolerance: float) -> tuple[list[str], bool]:
    """Lines of the comparison, and whether a figure moved for the worse."""
    before, after = _load(against), _load(None)
    lines = [f"figures against {against} (tolerance {tolerance:.0%}):", ""]
    worse = False
    for workload in workloads:
        old, new = EXTRACT[workload](*before), EXTRACT[workload](*after)
        for name, value in new.items():
            was = old.get(name)
            if value is None:
                lines.append(f"  {workload:14} {name}: no figure")
                continue
            if was is None:
                lines.append(f"  {workload:14} {name}: {value:.3g} (new)")
                continue
            change = value / was - 1 if was else 0.0
            better_up = "higher is better" in name
            verdict = "same"
            if abs(change) > tolerance:
                verdict = "BETTER" if (change > 0) == better_up else "WORSE"
                worse = worse or verdict == "WORSE"
            lines.append(
                f"  {workload:14} {name}: {was:.3g} -> {value:.3g} ({change:+.1%}) {verdict}"
            )
    return lines, worse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(COMMANDS), help="comma list")
    parser.add_argument("--against", default="HEAD", help="the revision to compare with")
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--compare-only", action="store_true")
    args = parser.parse_args()
    if "PYTEST_CURRENT_TEST" in os.environ:
        raise SystemExit("a benchmark, not a test")
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(workloads) - set(COMMANDS)
    if unknown:
        raise SystemExit(f"unknown workloads: {', '.join(sorted(unknown))}")
    failed = []
    if not args.compare_only:
        for workload in workloads:
            print(f"== {workload}: {' '.join(COMMANDS[workload])}", file=sys.stderr, flush=True)
            done = subprocess.run([PY, *COMMANDS[workload]], cwd=REPO)
            if done.returncode:
                failed.append(workload)
    lines, worse = compare(workloads, args.against, args.tolerance)
    print("\n".join(lines))
    if failed:
        print(f"\nruns that failed (or whose sides disagreed): {', '.join(failed)}")
    return 1 if failed or worse else 0


if __name__ == "__main__":
    sys.exit(main())
