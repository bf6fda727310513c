"""Benchmark our trial reader against the real smdebug 1.0.34 on the same trial, in one run:
``.venv/bin/python bench/run.py --help`` says how (bench/README.md, "Running").

The runner is the package bench/runner/ (``runner.cli`` reads the command line); this file puts
bench/ on ``sys.path``, where the runner and the workload scripts import each other from.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from runner.cli import main  # noqa: E402  (bench/ is on sys.path from the line above)

if __name__ == "__main__":
    sys.exit(main())
