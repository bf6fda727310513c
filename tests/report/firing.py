"""The check every built-in rule's report must pass: the recorded series of the tensor(s) that
fired holds the firing value at the firing step, as the result file's reason gives them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from evaluator.report import DATA_FILE_NAME, REPORT_FILE_NAME

__all__ = ["assert_report_holds_the_firing"]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b  # "Infinity", "-Infinity"
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)


def assert_report_holds_the_firing(output_dir: Path, rule: str) -> dict[str, Any]:
    """The run in ``output_dir`` fired ``rule``; its report exists and its data file's series
    holds the first firing reason's value at its step. Returns that series."""
    result = json.loads((output_dir / "rule_evaluation_result.json").read_text())
    (entry,) = [r for r in result["rules"] if r["rule"] == rule]
    assert entry["status"] == "IssuesFound", entry["details"]
    reason = entry["evidence"]["reasons"][0]
    assert reason["step"] in entry["fired_steps"]
    data = json.loads((output_dir / DATA_FILE_NAME).read_text())
    candidates = [
        s
        for s in data["rules"][entry["configuration_name"]]["series"]
        if s["tensors"] == reason["tensors"]
        and s["parameter"] == reason["parameter"]
        and s["comparison"] == reason["comparison"]
    ]
    point = [reason["step"], reason["value"]]
    holding = [
        s
        for s in candidates
        if any(p[0] == point[0] and _same(p[1], point[1]) for p in s["points"])
    ]
    assert holding, f"no series of {reason['tensors']} holds {point}: {candidates}"
    (series,) = holding[:1]
    assert any(f[0] == point[0] and _same(f[1], point[1]) for f in series["firings"])
    html = (output_dir / REPORT_FILE_NAME).read_text(encoding="utf-8")
    # a chart over the steps, or bars for a quantity judged at one step (never an empty axis)
    assert 'class="chart-spec"' in html or 'class="bars"' in html
    assert "fired at step" in html and "What to try" in html
    return series
