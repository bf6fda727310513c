"""The local hot paths of another commit's tree against this tree's, in one run (issue 37's
before and after: the source seam must not slow a workload by more than 3 %).

    git archive BASE | tar -x -C /tmp/before && ln -s "$PWD/bench/.work" /tmp/before/bench/.work
    .venv/bin/python bench/tree_before_after.py --before /tmp/before [--repeat 5] [--write]

Each workload runs in fresh processes of ``.venv/bin/python``, the two trees alternating; each
tree's script imports its own ``evaluator`` (the scripts put their tree first on ``sys.path``):

* ``values_all``, ``metadata``: ``bench/workloads.py --impl ours`` on the 2000 x 50 trial; the
  headline seconds (create_trial and the reads; imports apart), and pass 2 of values_all (every
  value read again: the per-value cost of ``Tensor.value``);
* ``rules_mixed``: ``bench/rules_workload.py --impl ours`` on the rules trial, its seconds;
* ``tensorboard``: ``bench/tb_log.py --side ours`` on the 1,000,000-scalar log, process CPU.

Both sides must give the same checksums. Prints a Markdown table of medians (and minimums: on a
shared machine the minimum is the least disturbed run); ``--write`` puts it into RESULTS.md as
its own section, which run.py keeps (runner/kept_sections.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = os.path.join(REPO, ".venv", "bin", "python")
BIG = "bench/.work/trials/big_2000x50x256"
MIXED = "bench/.work/trials/mixed_2000"
TB_LOG = "bench/.work/tensorboard/log_1000000x20000"
HEADING = "## Before and after: the local hot paths of two trees"

Pick = Callable[[dict[str, Any]], tuple[float, str]]

# workload -> (script and arguments, relative to a tree; (figure, checksum) from its JSON line)
WORKLOADS: dict[str, tuple[list[str], Pick]] = {
    "values_all": (
        ["bench/workloads.py", "--impl", "ours", "--trial", BIG, "--workload", "values_all"],
        lambda d: (d["seconds"], d["checksum"]),
    ),
    "values_all pass 2": (
        ["bench/workloads.py", "--impl", "ours", "--trial", BIG, "--workload", "values_all"],
        lambda d: (d["phases"]["pass2"], d["checksum"]),
    ),
    "metadata": (
        ["bench/workloads.py", "--impl", "ours", "--trial", BIG, "--workload", "metadata"],
        lambda d: (d["seconds"], d["meta_checksum"]),
    ),
    "rules_mixed": (
        ["bench/rules_workload.py", "--impl", "ours", "--trial", MIXED],
        lambda d: (d["seconds"], str(d["checksum"])),
    ),
    "tensorboard (CPU s)": (
        ["bench/tb_log.py", "--side", "ours", TB_LOG],
        lambda d: (d["cpu_seconds"], d["digest"]),
    ),
}


def _one(tree: str, args: list[str]) -> dict[str, Any]:
    p = subprocess.run([PY, *args], cwd=tree, capture_output=True, text=True, timeout=1200)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode or not lines:
        raise SystemExit(f"{tree}: {' '.join(args)} failed: {p.stderr.strip()[-500:]}")
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def measure(before: str, repeat: int, names: list[str]) -> dict[str, dict[str, list[float]]]:
    """Every workload ``repeat`` times per tree, alternating; the figures by tree."""
    out: dict[str, dict[str, list[float]]] = {}
    runs: dict[tuple[str, str], dict[str, Any]] = {}  # one process serves both values_all rows
    for name in names:
        args, pick = WORKLOADS[name]
        figures: dict[str, list[float]] = {"before": [], "after": []}
        sums: set[str] = set()
        for i in range(repeat):
            for side, tree in (("before", before), ("after", REPO)):
                key = (" ".join(args), f"{side}{i}")
                data = runs.get(key) or _one(tree, args)
                runs[key] = data
                figure, checksum = pick(data)
                figures[side].append(float(figure))
                sums.add(checksum)
        if len(sums) != 1:
            raise SystemExit(f"{name}: the two trees read different values: {sums}")
        out[name] = figures
        print(f"{name}: {figures}", file=sys.stderr)
    return out


def table(figures: dict[str, dict[str, list[float]]], before: str, repeat: int) -> str:
    rows = [
        HEADING,
        "",
        f"_Written {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} by "
        f"`bench/tree_before_after.py --repeat {repeat}`: {before} (before) against this "
        "tree (after), fresh processes, alternating; the same checksums on both sides._ "
        "Seconds are each script's headline (imports apart), except TensorBoard's (process "
        "CPU, imports included). On this shared 2-core machine the other jobs move single "
        "runs by 10 % and more: the minimum is the least disturbed run.",
        "",
        "| workload | before median | after median | after / before | "
        "before min | after min | after / before (min) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, sides in figures.items():
        b, a = statistics.median(sides["before"]), statistics.median(sides["after"])
        bmin, amin = min(sides["before"]), min(sides["after"])
        rows.append(
            f"| {name} | {b:.4f} | {a:.4f} | {a / b:.3f} | {bmin:.4f} | {amin:.4f} | "
            f"{amin / bmin:.3f} |"
        )
    return "\n".join(rows) + "\n"


def write(section: str) -> None:
    """Replace this bench's section of RESULTS.md, or add it at the end."""
    path = os.path.join(HERE, "RESULTS.md")
    with open(path) as f:
        text = f.read()
    start = text.find(HEADING)
    if start >= 0:
        end = text.find("\n## ", start + len(HEADING))
        text = text[:start] + section + ("" if end < 0 else text[end + 1 :])
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the other tree (git archive of it)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", action="append", choices=sorted(WORKLOADS))
    parser.add_argument("--write", action="store_true", help="write the table into RESULTS.md")
    args = parser.parse_args()
    figures = measure(os.path.abspath(args.before), args.repeat, args.only or list(WORKLOADS))
    section = table(figures, args.before, args.repeat)
    print(section)
    if args.write:
        write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
