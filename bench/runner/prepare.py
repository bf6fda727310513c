"""Before a run: the smdebug venv (bench/setup_smdebug.sh), the trials (bench/make_trial.py,
written by smdebug itself, kept while their manifest matches), a warm page cache, and whether
ours imports under the interpreter given."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import make_trial

from runner.common import HERE, REPO, SMDEBUG_PY, log, rel


def ensure_smdebug_venv() -> None:
    log("checking the smdebug 1.0.34 venv (bench/setup_smdebug.sh)")
    subprocess.run(["bash", os.path.join(HERE, "setup_smdebug.sh")], check=True, stdout=sys.stderr)


def trial_params(trial: str) -> argparse.Namespace:
    """make_trial.py's parameters for this trial: its defaults, or those in an existing manifest."""
    ns = argparse.Namespace(out=trial, steps=2000, tensors=50, size=256, seed=1234)
    try:
        with open(make_trial.manifest_path(trial)) as f:
            m = json.load(f)
        for k in ("steps", "tensors", "size", "seed"):
            setattr(ns, k, int(m.get(k, getattr(ns, k))))
    except (OSError, ValueError, TypeError):
        pass
    return ns


def ensure_trial(trial: str) -> dict[str, Any]:
    """Write the trial with smdebug's writer unless it is complete; return its manifest."""
    args = trial_params(trial)
    if not make_trial.is_complete(trial, make_trial.wanted_manifest(args)):
        ensure_smdebug_venv()
        log(f"writing the trial with smdebug's own writer (about 2 minutes): {rel(trial)}")
        subprocess.run(
            [
                SMDEBUG_PY,
                os.path.join(HERE, "make_trial.py"),
                "--out",
                trial,
                "--steps",
                str(args.steps),
                "--tensors",
                str(args.tensors),
                "--size",
                str(args.size),
                "--seed",
                str(args.seed),
            ],
            check=True,
            stdout=sys.stderr,
        )
    with open(make_trial.manifest_path(trial)) as f:
        manifest: dict[str, Any] = json.load(f)
    return manifest


def ensure_mixed_trial(trial: str) -> dict[str, Any]:
    """Write the rules trial (make_trial.py --kind mixed) unless it is complete; its manifest."""
    args = argparse.Namespace(out=trial, kind="mixed", steps=2000, seed=1234)
    if not make_trial.is_complete(trial, make_trial.wanted_manifest(args)):
        ensure_smdebug_venv()
        log(f"writing the rules trial with smdebug's own writer (about 40 s): {rel(trial)}")
        subprocess.run(
            [SMDEBUG_PY, os.path.join(HERE, "make_trial.py"), "--kind", "mixed", "--out", trial],
            check=True,
            stdout=sys.stderr,
        )
    with open(make_trial.manifest_path(trial)) as f:
        manifest: dict[str, Any] = json.load(f)
    return manifest


def warm_page_cache(trial: str) -> None:
    n = 0
    for d, _, fs in os.walk(trial):
        for f in fs:
            with open(os.path.join(d, f), "rb") as fh:
                while fh.read(1 << 20):
                    pass
            n += 1
    log(f"page cache warmed: {n} files")


def probe_ours(py: str) -> str | None:
    """None when evaluator.trial.create_trial imports, else the reason it does not."""
    if not os.path.exists(py):
        return f"no interpreter {py}"
    code = f"import sys; sys.path.insert(0, {REPO!r}); from evaluator.trial import create_trial"
    p = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=REPO)
    if p.returncode == 0:
        return None
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {p.returncode}"
