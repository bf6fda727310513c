"""The report's data file, ``rule_report_data.json``, beside the result file: what the rules
recorded that the result file does not hold (it stays lean), so that ``rule-evaluator report``
can draw the report again after the run. Schema, version 1::

    {
      "version": 1,
      "rules": {
        "<configuration name>": {
          "series": [{                       # evaluator.rules.evidence.Series.to_dict
            "tensors": ["gradients/dense/kernelGrad"], "quantity": "mean |gradient|",
            "mode": null,                    # "TRAIN", "EVAL"...: a series kept per mode
            "parameter": "threshold", "comparison": "<", "threshold": 1e-07,
                                             # (both null: watched, Evidence.record)
            "threshold_changes": [],         # [step, threshold] where it moved
            "count": 2000,                   # values recorded
            "points": [[0, 0.012], ...],     # downsampled; firings and closest kept exactly
            "firings": [[500, 3.1e-09]], "firing_count": 1,
            "closest": [500, 3.1e-09]        # the value nearest to (or past) the threshold
          }],
          "points_left_out": 0,              # comparisons beyond the series a rule keeps
          "run": [{                          # evaluator.report.run_curves: the whole run
            "tensors": ["loss"], "quantity": "loss", "mode": "EVAL",
            "count": 200,                    # values the trial holds
            "points": [[1, 2.31], ...]}],    # downsampled for drawing, firings kept
          "histogram": {                     # the fired tensor's values at the firing step
            "tensor": "...", "step": 500, "edges": [...], "counts": [...],
            "nonfinite": 0, "size": 4096,    # (evaluator.report.histogram; null: none)
            "low": -0.1, "high": 0.2},       # the finite values' range
          "trial_summary": null              # evaluator.summary.TrialSummary, for an Error
        }
      }
    }

Values JSON cannot hold are the strings "NaN", "Infinity", "-Infinity", as in the result
file. A rule found in the result file but not here (a run that recorded nothing, or a custom
rule) has a report with its verdict and reason only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaluator.fileio import read_capped, write_atomically
from evaluator.report.histogram import firing_histogram
from evaluator.report.run_curves import run_curves
from evaluator.rules.evidence import Evidence
from evaluator.summary import summarize

__all__ = ["DATA_FILE_NAME", "IGNORED_DIR", "collect", "read_data", "write_data"]

DATA_FILE_NAME = "rule_report_data.json"
IGNORED_DIR = ".sagemaker-ignore"  # temporary files; SageMaker does not upload this folder
POINT_BUDGET = 100_000  # points in the whole file; each series gets its share (>= 500)
MAX_SUMMARY_TENSORS = 500
MAX_DATA_FILE_BYTES = 256 * 1024 * 1024


def read_data(output_dir: Path) -> dict[str, Any]:
    """The data file of ``output_dir``; an empty one when there is none (or it is unreadable:
    the report then shows verdicts and reasons only)."""
    try:  # never from a FIFO or device, never past the size limit (fileio.read_capped)
        raw = read_capped(output_dir / DATA_FILE_NAME, MAX_DATA_FILE_BYTES)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {"version": 1, "rules": {}}
    return (
        data
        if isinstance(data, dict) and isinstance(data.get("rules"), dict)
        else {
            "version": 1,
            "rules": {},
        }
    )


def data_stamp(output_dir: Path) -> tuple[int, int, int] | None:
    """What tells one data file of ``output_dir`` from another (inode, modification time, size:
    every write replaces the file), None when there is none."""
    try:
        found = os.stat(output_dir / DATA_FILE_NAME, follow_symlinks=False)
    except OSError:
        return None
    return (found.st_ino, found.st_mtime_ns, found.st_size)


def write_data(output_dir: Path, data: Mapping[str, Any]) -> Path:
    path = output_dir / DATA_FILE_NAME
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    write_atomically(path, text.encode("ascii"), tmp_dir=output_dir / IGNORED_DIR)
    return path


def collect(
    result: Mapping[str, Any],
    previous: Mapping[str, Any],
    evidence: Mapping[str, Any],
    *,
    read_run: bool = True,
) -> dict[str, Any]:
    """The data file for ``result`` (the result file's document): each rule's series taken
    from its ``Evidence`` in ``evidence`` (by configuration name: the run's rules, alive), else
    kept from ``previous``; the whole run behind its loss curves read from its trial
    (``read_run``: a report is being written; else kept from ``previous``); for a rule in
    Error, the trial's summary."""
    rules = [r for r in result.get("rules", []) if isinstance(r, Mapping)]
    live = {_key(r): _live(evidence.get(_key(r))) for r in rules}
    counts = [_series_count(r) for r in rules if live[_key(r)] is not None]
    limit = max(500, POINT_BUDGET // max(1, sum(counts)))
    old = previous.get("rules", {})
    out: dict[str, Any] = {}
    for rule in rules:
        key = _key(rule)
        found = live[key]
        kept = old.get(key, {})
        entry = dict(kept) if found is None else dict(found.series(limit=limit))
        if found is not None and read_run:
            entry["run"] = run_curves(found.trial, entry.get("series") or [], _fired(rule))
        elif kept.get("run"):
            entry["run"] = kept["run"]
        if kept.get("histogram"):
            entry["histogram"] = kept["histogram"]
        elif found is not None and rule.get("fired_steps"):
            evidence_doc = rule.get("evidence")
            reasons = evidence_doc.get("reasons") if isinstance(evidence_doc, Mapping) else None
            entry["histogram"] = firing_histogram(found.trial, reasons)
        if rule.get("status") == "Error" and not entry.get("trial_summary"):
            trial = _trial_of(found, live.values())
            entry["trial_summary"] = _summary(trial) if trial is not None else None
        out[key] = entry
    return {"version": 1, "rules": out}


def carried_over(data: Mapping[str, Any], evidence: Mapping[str, Any]) -> dict[str, Any]:
    """What ``collect`` takes from ``data`` (a data file it made from ``evidence``) when it
    runs again with the same rules alive: the entries of rules with no ``Evidence`` whole, and
    of the others only what is not drawn again from their evidence (the run's curves and the
    firing histogram): the series, up to ``POINT_BUDGET`` points, are never held twice."""
    rules = data.get("rules", {})
    out: dict[str, Any] = {}
    for key, entry in rules.items():
        if _live(evidence.get(key)) is None:
            out[key] = entry
        else:
            out[key] = {k: entry[k] for k in ("run", "histogram") if k in entry}
    return {"version": 1, "rules": out}


def _key(rule: Mapping[str, Any]) -> str:
    return str(rule.get("configuration_name") or rule.get("rule"))


def _fired(rule: Mapping[str, Any]) -> list[int]:
    return [s for s in rule.get("fired_steps") or [] if isinstance(s, int)]


def _series_count(rule: Mapping[str, Any]) -> int:
    evidence = rule.get("evidence")
    count = evidence.get("series") if isinstance(evidence, Mapping) else None
    return count if isinstance(count, int) else 0


def _live(evidence: Any) -> Evidence | None:
    return evidence if isinstance(evidence, Evidence) else None


def _trial_of(own: Evidence | None, others: Any) -> Any:
    """The base trial the rule read: its own, else another rule's of the same run (a rule that
    was never built has none)."""
    for evidence in [own, *others]:
        if evidence is not None and evidence.trial is not None:
            return evidence.trial
    return None


def _summary(trial: Any) -> dict[str, Any]:
    try:
        summary = summarize(trial).to_dict()
    except Exception as e:  # a summary is a help; never fail the report over it
        return {"error": f"{type(e).__name__}: {e}"}
    tensors = summary.get("tensors", {})
    if len(tensors) > MAX_SUMMARY_TENSORS:
        summary["tensors"] = dict(list(tensors.items())[:MAX_SUMMARY_TENSORS])
        summary["tensors_left_out"] = len(tensors) - MAX_SUMMARY_TENSORS
    return summary
