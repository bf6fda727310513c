"""The batch's summary: a table for the terminal, ``batch_summary.csv``, ``batch_summary.json``
and ``index.html`` (one row per job, linking its ``rule_report.html``), and the exit code of
the worst outcome."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from container.batch.job import DOCUMENTED_CODES, STILL_GOING, JobOutcome
from evaluator.config.output_paths import BATCH_FOLDER, SUMMARY_CSV, SUMMARY_JSON, SUMMARY_PAGE
from evaluator.fileio import write_atomically
from evaluator.redaction import escape_controls, escape_html

__all__ = ["SUMMARY_CSV", "SUMMARY_JSON", "SUMMARY_PAGE", "format_table", "worst_exit_code"]
_COLUMNS = ("job", "status", "exit_code", "step", "rules", "seconds", "kept", "trial", "message")


def _rank(code: int) -> int:
    """Stopped, then an internal error, then a client error, then issues found, then none."""
    return {0: 0, 1: 1, 2: 2, 3: 3, 130: 4, 143: 4}[code]


def worst_exit_code(outcomes: Sequence[JobOutcome]) -> int:
    """The exit code of the most severe outcome, always a documented one (an unknown code
    counts as an internal error, 3); 0 for none. A job still going (``STILL_GOING``) has no
    outcome yet and does not count."""
    codes = (
        o.exit_code if o.exit_code in DOCUMENTED_CODES else 3
        for o in outcomes
        if o.exit_code != STILL_GOING
    )
    return max(codes, key=_rank, default=0)


def _code_text(outcomes: Sequence[JobOutcome], code: int) -> str:
    """``exit code N``, with how many jobs are still going when some are (a watch's page)."""
    going = sum(1 for o in outcomes if o.exit_code == STILL_GOING)
    return f"exit code {code}" if not going else f"exit code {code} so far, {going} still going"


def _rules_cell(outcome: JobOutcome) -> str:
    return "; ".join(
        f"{r['rule']}={r['status']}" + (f"@{r['step']}" if r["status"] == "IssuesFound" else "")
        for r in outcome.rules
    )


def _row(outcome: JobOutcome) -> dict[str, Any]:
    message = (outcome.message or "").strip().replace("\n", " ")
    return {
        "job": outcome.name,
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "step": "" if outcome.step is None else outcome.step,
        "rules": _rules_cell(outcome),
        "seconds": "" if outcome.seconds is None else f"{outcome.seconds:.1f}",
        "kept": "yes" if outcome.kept else "",
        "trial": outcome.trial,
        "message": message,
    }


def format_table(outcomes: Sequence[JobOutcome], *, width: int = 120) -> str:
    """The terminal's table: one line per job, then the counts by status."""
    shown = ("job", "status", "exit_code", "step", "rules", "seconds", "kept")
    rows = [{k: escape_controls(str(v)) for k, v in _row(o).items()} for o in outcomes]
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in shown}
    widths["rules"] = min(widths["rules"], 60)
    lines = ["  ".join(c.ljust(widths[c]) for c in shown).rstrip()]
    for r in rows:
        cells = [r[c] if len(r[c]) <= widths[c] else r[c][: widths[c] - 1] + "…" for c in shown]
        lines.append("  ".join(v.ljust(widths[c]) for v, c in zip(cells, shown)).rstrip())
    counts = Counter(o.status for o in outcomes)
    lines.append(
        f"{len(outcomes)} job(s): "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        + f"; {_code_text(outcomes, worst_exit_code(outcomes))}"
    )
    return "\n".join(line[:width] if i else line for i, line in enumerate(lines)) + "\n"


def write_summary(root: Path, outcomes: Sequence[JobOutcome], *, engine: str) -> None:
    """``batch_summary.json``, ``batch_summary.csv`` and ``index.html`` in ``root``."""
    tmp = root / BATCH_FOLDER / "tmp"
    code = worst_exit_code(outcomes)
    document = {
        "version": 1,
        "exit_code": code,
        "engine": engine,
        "written_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z",
        "counts": dict(Counter(o.status for o in outcomes)),
        "jobs": [o.to_dict() for o in outcomes],
    }
    write_atomically(root / SUMMARY_JSON, json.dumps(document, indent=1).encode(), tmp_dir=tmp)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for outcome in outcomes:
        writer.writerow(_row(outcome))
    write_atomically(root / SUMMARY_CSV, buffer.getvalue().encode(), tmp_dir=tmp)
    write_atomically(root / SUMMARY_PAGE, _page(outcomes, code).encode(), tmp_dir=tmp)


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}th,td{padding:4px 10px;border-bottom:1px solid #ddd;
text-align:left;vertical-align:top}th{background:#f4f4f4}
.IssuesFound{color:#b35900;font-weight:600}.Error{color:#b00020;font-weight:600}
.NoIssuesFound{color:#1b7a2f}.Stopped{color:#555}td.msg{max-width:40em;font-size:12px}
small.id{color:#666;font-family:monospace}
"""


def _job_cell(outcome: JobOutcome) -> str:
    """The job, linking its report: by its title (an MLflow run's name) over its name (the
    run's id path), when it has one; else by its name."""
    e = escape_html
    shown = e(outcome.title or outcome.name)
    hint = f' title="{e(outcome.name)}"' if outcome.title else ""
    label = f'<a href="{e(outcome.report)}"{hint}>{shown}</a>' if outcome.report else shown
    if outcome.title:
        label += f"<br><small class='id'>{e(outcome.name)}</small>"
    return label


def _page(outcomes: Sequence[JobOutcome], code: int) -> str:
    """One self-contained page; every value escaped (trial paths and messages are the user's)."""
    e = escape_html
    counts = Counter(o.status for o in outcomes)
    rows = []
    for o in outcomes:
        r = _row(o)
        rows.append(
            "<tr>"
            f"<td>{_job_cell(o)}</td><td class='{e(o.status)}'>{e(o.status)}</td>"
            f"<td>{o.exit_code}</td><td>{e(str(r['step']))}</td><td>{e(r['rules'])}</td>"
            f"<td>{e(r['seconds'])}</td><td>{e(r['kept'])}</td><td>{e(o.trial)}</td>"
            f"<td class='msg'>{e(r['message'])}</td></tr>"
        )
    tally = ", ".join(f"{n} {e(s)}" for s, n in sorted(counts.items()))
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Rule evaluation batch</title>"
        f"<style>{_STYLE}</style></head><body><h1>Rule evaluation batch</h1>"
        f"<p>{len(outcomes)} job(s): {tally}; {_code_text(outcomes, code)}. "
        f"<a href='{SUMMARY_CSV}'>CSV</a> · <a href='{SUMMARY_JSON}'>JSON</a></p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "</body></html>\n"
    )
