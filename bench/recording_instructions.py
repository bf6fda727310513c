"""What the read charts cost a user's rule, counted in instructions (issue 42): a measure the
shared machine's load does not move, for when the timed sides of ``bench/user_rules.py``
cannot resolve a few per cent.

    .venv/bin/python bench/recording_instructions.py                      # ExplodingTensor
    .venv/bin/python bench/recording_instructions.py --only VanishingGradient,AllZero

Three processes of ``bench/user_rules.py --child`` run under ``valgrind --tool=callgrind``
(one at a time, or side by side: a count does not depend on the load): the rules with the read
charts on, the same with them off, and one that runs no rule (the imports and the trial's
opening, the same on both sides). Each process's instructions are counted (``Collected``);
the rule bodies' own are the process's minus the third's, and the figure is on / off of those.
``PYTHONHASHSEED`` is fixed so that sets and dicts lay out alike on every side. Instructions
are not time: a cache miss counts once, however long it stalls. Under valgrind a rule runs
about 50 times slower, so the read charts' recent step (at least every second of the clock)
is held about 50 times as often as in a normal run: the count on the side with the charts
on is, if anything, high. Stored in ``bench/results_scale.json`` under
``recording_instructions`` and rendered beside the user-rule section; never run from the
test suite. About 5 minutes for ExplodingTensor on an idle core.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from user_rules import OURS_PY, TRIAL  # noqa: E402

_COLLECTED = re.compile(r"Collected\s*:\s*([0-9]+)")


def count(trial: str, recording: str, only: str, out_dir: str) -> int:
    """The instructions of one child process (all its threads) under callgrind."""
    out = os.path.join(out_dir, f"callgrind.{recording}.{only.replace(',', '+')}.out")
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        OURS_PY,
        os.path.join(HERE, "user_rules.py"),
        "--child",
        "--trial",
        trial,
        "--recording",
        recording,
        "--only",
        only,
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"valgrind gave no count: {done.stderr[-500:]}")
    os.remove(out)
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trial", default=TRIAL)
    parser.add_argument("--only", default="ExplodingTensor", help="comma list of rule names")
    parser.add_argument("--parallel", type=int, default=3, help="processes at once")
    parser.add_argument("--no-store", action="store_true", help="print, keep results as they are")
    args = parser.parse_args()
    if "PYTEST_CURRENT_TEST" in os.environ:
        raise SystemExit("a benchmark, not a test")
    work = os.path.join(HERE, ".work")
    os.makedirs(work, exist_ok=True)
    sides = {"on": ("on", args.only), "off": ("off", args.only), "none": ("on", "NONE")}
    with ThreadPoolExecutor(args.parallel) as pool:
        futures = {k: pool.submit(count, args.trial, r, o, work) for k, (r, o) in sides.items()}
        counts = {k: f.result() for k, f in futures.items()}
    on, off = counts["on"] - counts["none"], counts["off"] - counts["none"]
    figures = {
        "rules": args.only.split(","),
        "instructions": counts,
        "rules_on": on,
        "rules_off": off,
        "recording_cost_instructions": round(on / off, 4),
    }
    print(figures)
    if not args.no_store:
        from scale_report import store

        store("recording_instructions", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
