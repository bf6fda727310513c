#!/usr/bin/env python3
"""Build the TensorBoard-log fixtures: real writers (torch's SummaryWriter, Keras 3's TensorBoard
callback, tf.summary, Lightning's TensorBoardLogger) on tiny training jobs, each with a
labels.json measured while training.

    python3 tools/make_tb_logs/make.py                         # venvs + every run
    python3 tools/make_tb_logs/make.py --only torch_healthy keras_overfit
    python3 tools/make_tb_logs/make.py --skip-install          # reuse the venvs

Virtual environments live OUTSIDE the repository (default ~/.cache/tb-logs-venvs, or
$TB_LOGS_VENVS). Each run is written to a scratch folder by its script in its venv, then copied
to tests/fixtures/tb_logs/<name>/; the index README there is rewritten.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEST = REPO / "tests" / "fixtures" / "tb_logs"
# Runs that are MLflow runs first (a store beside the TensorBoard log of the same training): kept
# apart, so that the TensorBoard suites and benches over DEST do not count one training twice.
MLFLOW_DEST = REPO / "tests" / "fixtures" / "mlflow_runs"
DESTS = {"lightning_real_mlflow_overfit": MLFLOW_DEST}
VENVS = {
    "torch": "requirements-torch.txt",
    "tf": "requirements-tf.txt",
    "lightning": "requirements-lightning.txt",
}
SCRIPTS = {
    "torch": (
        "torch_runs.py",
        [
            "torch_healthy",
            "torch_vanishing",
            "torch_exploding",
            "torch_flat",
            "torch_overfit",
            "torch_tutorial_overfit",
            "torch_add_scalars_overfit",
            "lightning_overfit",
            "lightning_vanishing",
            "hf_overfit",
            "hf_exploding",
        ],
    ),
    "tf": (
        "tf_runs.py",
        [
            "keras_healthy",
            "keras_overfit",
            "keras_batch_flat",
            "keras_exploding",
            "tf_healthy",
            "tf_vanishing",
            "tf_exploding",
        ],
    ),
    "lightning": ("lightning_runs.py", ["lightning_real_overfit", "lightning_real_mlflow_overfit"]),
}
MAX_BYTES = 1 << 20


def venv_python(venvs: Path, name: str, install: bool) -> Path:
    py = venvs / name / "bin" / "python"
    if install:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venvs / name)], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "-r", str(HERE / VENVS[name])], check=True
        )
    return py


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def index() -> None:
    rows = []
    for run in sorted(p for p in DEST.iterdir() if (p / "labels.json").is_file()):
        labels = json.loads((run / "labels.json").read_text())
        files = sorted(str(p.relative_to(run)) for p in run.rglob("events.out.tfevents.*"))
        folders = sorted({os.path.dirname(f) or "." for f in files})
        rows.append(
            f"| `{run.name}` | {labels['writer']} | {', '.join(folders)} | "
            f"{', '.join(labels['expected']) or '–'} | {', '.join(labels['also']) or '–'} | "
            f"{labels['description']} |"
        )
    (DEST / "README.md").write_text(
        "# TensorBoard logs written by the real writers\n\n"
        "Made by `tools/make_tb_logs/make.py` (read its README): tiny training jobs logging with\n"
        "PyTorch's `SummaryWriter`, Keras 3's `TensorBoard` callback, `tf.summary` and the real\n"
        "Lightning `Trainer` with its `TensorBoardLogger` (`lightning_real_overfit`), and the tag\n"
        "names of Lightning's and Hugging Face's TensorBoard loggers written with `SummaryWriter`.\n"
        "Each run's `labels.json` holds what the script measured and the verdicts expected with\n"
        "default parameters: `expected` (must fire), `also` (may fire: set off by the fault, by\n"
        "the rule's own definition), `quiet` (must find no issue), `insufficient` (must end\n"
        '"Insufficient information"); no other rule may fire. Checked by\n'
        "`tests/integration/test_tb_real_writers.py`.\n\n"
        "| run | writer | folders with event files | must fire | may fire | what |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--skip-install", action="store_true")
    default = os.environ.get("TB_LOGS_VENVS", str(Path.home() / ".cache" / "tb-logs-venvs"))
    parser.add_argument("--venvs", type=Path, default=Path(default))
    args = parser.parse_args()
    DEST.mkdir(parents=True, exist_ok=True)
    for venv, (script, runs) in SCRIPTS.items():
        wanted = [r for r in runs if not args.only or r in args.only]
        if not wanted:
            continue
        py = venv_python(args.venvs, venv, not args.skip_install)
        for run in wanted:
            with tempfile.TemporaryDirectory(prefix="tb-log-") as scratch:
                out = Path(scratch) / run
                env = {**os.environ, "PYTHONHASHSEED": "0"}
                subprocess.run(
                    [str(py), str(HERE / script), "--scenario", run, "--out", str(out)],
                    check=True,
                    env=env,
                )
                assert size(out) < MAX_BYTES, f"{run} is {size(out)} bytes"
                dest = DESTS.get(run, DEST)
                shutil.rmtree(dest / run, ignore_errors=True)
                shutil.copytree(out, dest / run)
                print(f"{run}: {size(out)} bytes")
    index()


if __name__ == "__main__":
    main()
