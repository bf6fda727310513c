"""False alarms on real healthy runs, and real faults caught with the right diagnosis.

    .venv/bin/python bench/false_alarms.py        # writes bench/FALSE_ALARMS.md (about a minute)

Every built-in rule runs with default parameters on

* the real Hugging Face Trainer runs of ``shared/data/wild-hf-dev`` (their TensorBoard logs,
  labelled from the log alone: ``tests/support/real_runs.py``), and
* the project's own labelled trials: the real-hook smdebug trials (``tests/fixtures/hook_trials``)
  and the TensorBoard logs of the real writers (``tests/fixtures/tb_logs``), labelled by what
  their training scripts did (the run's name says it: ``*_healthy``, ``*_overfit``, ...).

Per rule: the healthy runs with any firing, those with a firing whose diagnosis is not
``converged`` (a converged run that stops improving is a stop signal, not a fault; any other
diagnosis on a healthy run is a false alarm), and the faulty runs caught: a firing at or after
the fault's onset (wild runs; the project's trials have no onset here: bench/DETECTION.md
times them) whose diagnosis matches the fault (overfit -> ``overfitting``, diverged ->
``diverging``, not learning -> ``not_learning``). Not a test and not timed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.real_runs import MATCHING, WILD, Verdict, judge_log, wild_labels  # noqa: E402

REPORT = ROOT / "bench" / "FALSE_ALARMS.md"
HOOK_TRIALS = ROOT / "tests" / "fixtures" / "hook_trials"
TB_LOGS = ROOT / "tests" / "fixtures" / "tb_logs"

# A project trial's name -> its label (the first word found wins).
_NAME_LABELS = (
    ("healthy", "healthy"),
    ("overfit", "overfit"),
    ("exploding", "diverged"),
    ("nan", "diverged"),
    ("flat", "not-learning"),
    ("stalled", "not-learning"),
)


def _label_of(name: str) -> str:
    return next((label for word, label in _NAME_LABELS if word in name), "other fault")


def _runs() -> list[dict[str, Any]]:
    """Every run: set, id, path, label, onset."""
    runs = [
        {"set": "wild-hf-dev", "id": lab["id"], "path": WILD / "tb" / lab["id"],
         "label": lab["judgement"], "onset": lab.get("fault_onset_step")}
        for lab in wild_labels()
    ]  # fmt: skip
    for kind, folder in (("hook trial", HOOK_TRIALS), ("TensorBoard log", TB_LOGS)):
        for path in sorted(p for p in folder.iterdir() if (p / "labels.json").is_file()):
            label = _label_of(path.name)
            runs.append({"set": kind, "id": path.name, "path": path, "label": label, "onset": None})
    return runs


def _caught(run: dict[str, Any], verdict: Verdict) -> bool:
    firing, wanted = verdict.firing, MATCHING.get(run["label"])
    if firing is None or wanted is None or firing.diagnosis != wanted:
        return False
    return run["onset"] is None or firing.step >= run["onset"]


def measure() -> dict[str, Any]:
    rows = []
    for run in _runs():
        verdicts = judge_log(run["path"])
        rows.append({**{k: run[k] for k in ("set", "id", "label", "onset")},
                     "cells": {rule: v.cell for rule, v in verdicts.items()},
                     "fired": sorted(r for r, v in verdicts.items() if v.firing),
                     "alarm": sorted(r for r, v in verdicts.items() if not v.converged_or_quiet()),
                     "caught": sorted(r for r, v in verdicts.items() if _caught(run, v))})  # fmt: skip
        print(f"{run['set']:16} {run['label']:13} {run['id'][:40]:40} {rows[-1]['fired']}")
    return {"rows": rows}


def _per_rule(rows: list[dict[str, Any]], sets: tuple[str, ...]) -> list[str]:
    mine = [r for r in rows if r["set"] in sets]
    healthy = [r for r in mine if r["label"] == "healthy"]
    faults = [r for r in mine if r["label"] in MATCHING]
    rules = sorted({rule for r in mine for rule in r["fired"]})
    out = [f"Healthy runs: {len(healthy)}; faults with a loss diagnosis: {len(faults)}.", "",
           "| rule | healthy runs with a firing | with a non-converged firing "
           "| faults caught (at or after onset, matching diagnosis) |", "|---|---:|---:|---:|"]  # fmt: skip
    for rule in rules:
        fired = sum(1 for r in healthy if rule in r["fired"])
        alarm = sum(1 for r in healthy if rule in r["alarm"])
        caught = sum(1 for r in faults if rule in r["caught"])
        out.append(f"| {rule} | {fired} / {len(healthy)} | {alarm} / {len(healthy)} | "
                   f"{caught} / {len(faults)} |")  # fmt: skip
    fired = sum(1 for r in healthy if r["fired"])
    alarm = sum(1 for r in healthy if r["alarm"])
    caught = sum(1 for r in faults if r["caught"])
    out.append(f"| **any rule** | **{fired} / {len(healthy)}** | **{alarm} / {len(healthy)}** | "
               f"**{caught} / {len(faults)}** |")  # fmt: skip
    return out


def render(figures: dict[str, Any]) -> str:
    rows = figures["rows"]
    out = [
        "# False alarms on real healthy runs",
        "",
        "Generated by `bench/false_alarms.py` (do not edit); every built-in rule with default",
        "parameters. A firing diagnosed `converged` on a healthy run is a stop signal (the loss",
        "fell and flattened), not a false alarm; any other firing on a healthy run is one. A",
        "fault is caught by a firing at or after its onset whose diagnosis matches it",
        "(overfit: `overfitting`, diverged: `diverging`, not learning: `not_learning`).",
        "",
        "## Real Hugging Face Trainer runs (shared/data/wild-hf-dev)",
        "",
        *_per_rule(rows, ("wild-hf-dev",)),
        "",
        "## The project's labelled trials (real hooks and real TensorBoard writers)",
        "",
        "Labels from the run's name (what its training script did); no onset (bench/DETECTION.md",
        "times them against their documented bounds).",
        "",
        *_per_rule(rows, ("hook trial", "TensorBoard log")),
        "",
        "## Every run",
        "",
        "| set | run | label | onset | firings (step and diagnosis) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        cells = "; ".join(f"{rule} {r['cells'][rule]}" for rule in r["fired"]) or "quiet"
        onset = "-" if r["onset"] is None else r["onset"]
        out.append(f"| {r['set']} | {r['id']} | {r['label']} | {onset} | {cells} |")
    return "\n".join(out) + "\n"


def main() -> None:
    if "pytest" in sys.modules:
        raise SystemExit("bench/false_alarms.py is a benchmark, not a test")
    if not WILD.is_dir():
        raise SystemExit(f"the wild runs are not at {WILD} (shared/ beside the checkout)")
    figures = measure()
    REPORT.write_text(render(figures))
    (ROOT / "bench" / "false_alarms.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(REPORT.read_text())


if __name__ == "__main__":
    main()
