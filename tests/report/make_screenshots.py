"""Draw the screenshots in docs/ (report-issues-found.png, report-no-issues-found.png,
report-error.png) from the report tests' 2000-step fading-gradient trial:

    .venv/bin/python -m tests.report.make_screenshots [DOCS_DIR]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from evaluator.report import REPORT_FILE_NAME
from tests.report.browser import chromium
from tests.report.harness import ROOT, evaluate_with_report
from tests.report.trials import write_fading_gradients

SHOTS = {
    "report-issues-found.png": (["--rule", "VanishingGradient"], 1180),
    "report-no-issues-found.png": (["--rule", "VanishingGradient", "--threshold", "1e-9"], 1180),
    "report-error.png": (["--rule", "AllZero", "--tensor_regex", "relu_output"], 1420),
}


def main(argv: list[str]) -> int:
    docs = Path(argv[0]) if argv else ROOT / "docs"
    binary = chromium()
    with tempfile.TemporaryDirectory() as tmp:
        trial = write_fading_gradients(Path(tmp) / "debug-output")
        for name, (flags, height) in SHOTS.items():
            out = Path(tmp) / name.removesuffix(".png")
            run = evaluate_with_report(["--trial-dir", str(trial), *flags], out)
            profile = Path(tmp) / "profile"
            profile.mkdir(exist_ok=True)
            subprocess.run(
                [
                    binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={profile}", f"--window-size=1000,{height}",
                    f"--screenshot={out / name}", (out / REPORT_FILE_NAME).as_uri(),
                ],
                check=True, capture_output=True, timeout=90,
            )  # fmt: skip
            shutil.copyfile(out / name, docs / name)
            print(f"{docs / name}: exit {run.exit_code}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
