"""Bench: opening a TensorBoard log of N distinct tags (issue 40: it was quadratic).

Writes a log of N tags, two steps each (``evaluator.testing.tb_writer``), then, for each N in a
fresh process, opens it with ``create_trial`` and asks ``steps()`` and ``tensor_names()``: the
wall time and CPU time of that, and the ratio to the smallest N's time per tag. Linear costs
keep the per-tag time flat; a quadratic step makes it grow with N. A benchmark, not a test
(the tests count the work instead: tests/unit/trial/test_tensorboard_many_tags.py).

    .venv/bin/python bench/many_tags.py                       # 10,000 / 40,000 / 100,000 tags
    .venv/bin/python bench/many_tags.py --tags 20000 100000

Measured on the dev machine (2 shared cores, load about 10), issue 40: before, 20,000 tags
took 21.9 s (22.9 s in the issue) and 100,000 did not open in 600 s; after, 20,000 tags took
1.5 s and 100,000 took 5.8 s (the figures this prints vary with the machine's load).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_OPEN = """
import json, sys, time
from evaluator.trial import create_trial
wall, cpu = time.perf_counter(), time.process_time()
with create_trial(sys.argv[1], trial_format="tensorboard") as trial:
    steps, names = trial.steps(), trial.tensor_names()
print(json.dumps({"tags": len(names), "steps": len(steps),
                  "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))
"""


def _write(folder: Path, tags: int) -> None:
    from evaluator.testing.tb_writer import write_scalars

    write_scalars(folder, {f"layer_{i}/loss": [(0, 1.0), (1, 2.0)] for i in range(tags)})


def main() -> None:
    if "pytest" in sys.modules:
        raise SystemExit("bench/many_tags.py is a benchmark, not a test")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tags", type=int, nargs="+", default=[10_000, 40_000, 100_000])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.tags:
            folder = Path(tmp) / str(n)
            _write(folder, n)
            done = subprocess.run(
                [sys.executable, "-c", _OPEN, str(folder)],
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = rows[0]["wall"] / rows[0]["tags"]
    print("| tags | wall s | CPU s | wall per tag, to the first row |")
    print("|---:|---:|---:|---:|")
    for row in rows:
        ratio = row["wall"] / row["tags"] / first
        print(f"| {row['tags']:,} | {row['wall']:.2f} | {row['cpu']:.2f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
