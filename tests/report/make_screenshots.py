"""Draw the screenshots in docs/ (report-issues-found.png, report-no-issues-found.png,
report-error.png) from the report tests' 2000-step fading-gradient trial,
report-loss-curves.png from the Keras hook trial where Overfit fires, and
report-loss-not-decreasing.png from a 200-step TensorBoard run whose loss never falls:

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
from tests.report.harness import HOOK_TRIALS, ROOT, evaluate_with_report
from tests.report.trials import write_fading_gradients, write_flat_loss_run

SHOTS = {
    "report-issues-found.png": (["--rule", "VanishingGradient"], 1350),
    "report-no-issues-found.png": (["--rule", "VanishingGradient", "--threshold", "1e-9"], 1150),
    "report-error.png": (["--rule", "AllZero", "--tensor_regex", "relu_output"], 1420),
    "report-loss-curves.png": (
        ["--trial-dir", str(HOOK_TRIALS / "keras_overfit"), "--rule", "Overfit"],
        1850,
    ),
    "report-loss-not-decreasing.png": (
        ["--trial-dir", "FLAT_RUN", "--rule", "LossNotDecreasing"],
        1960,
    ),
}


def main(argv: list[str]) -> int:
    docs = Path(argv[0]) if argv else ROOT / "docs"
    binary = chromium()
    with tempfile.TemporaryDirectory() as tmp:
        trial = write_fading_gradients(Path(tmp) / "debug-output")
        flat = write_flat_loss_run(Path(tmp) / "tensorboard")
        for name, (flags, height) in SHOTS.items():
            out = Path(tmp) / name.removesuffix(".png")
            given = flags if "--trial-dir" in flags else ["--trial-dir", str(trial), *flags]
            given = [str(flat) if f == "FLAT_RUN" else f for f in given]
            run = evaluate_with_report(given, out)
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
