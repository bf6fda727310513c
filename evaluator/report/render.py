"""The whole report page: the run's verdict, an index of the rules when there are several,
and one section per rule (``evaluator.report.sections``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluator.report.charts import as_float
from evaluator.report.page import badge, document, escape, key_values, number, table
from evaluator.report.section_charts import chart_family
from evaluator.report.sections import anchor, fired_at, rule_section

__all__ = ["render_report"]


def render_report(result: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    """The report of ``result`` (the result file's document) with ``data`` (the data file's,
    ``evaluator.report.data``) as one HTML document."""
    rules = [r for r in result.get("rules") or [] if isinstance(r, Mapping)]
    by_rule = data.get("rules") or {}
    status = str(result.get("status") or "InProgress")
    names = ", ".join(str(r.get("configuration_name") or r.get("rule")) for r in rules)
    parts = [
        f"<h1>Rule report: {escape(names or 'no rule')} {badge(status)}</h1>",
        _run(result),
    ]
    if len(rules) > 1:
        parts.append(_index(rules))
    for rule in rules:
        key = str(rule.get("configuration_name") or rule.get("rule"))
        parts.append(rule_section(rule, by_rule.get(key) or {}))
    footer = (
        "Written by the rule evaluator from rule_evaluation_result.json and "
        "rule_report_data.json; <code>rule-evaluator report OUTPUT_DIR</code> writes it again."
    )
    return document(f"Rule report: {names} ({status})", "\n".join(parts), footer=footer)


def _run(result: Mapping[str, Any]) -> str:
    exit_code = result.get("exit_code")
    rows = [
        ("trial", f"<code>{escape(result.get('trial'))}</code>"),
        ("started", escape(result.get("started_at"))),
        ("finished", escape(result.get("finished_at") or "still running")),
        ("exit code", escape("none yet" if exit_code is None else exit_code)),
    ]
    message = result.get("message")
    if message:
        rows.append(("message", f"<code>{escape(str(message).strip())}</code>"))
    return key_values(rows)


def _index(rules: list[Mapping[str, Any]]) -> str:
    rows = []
    for rule in rules:
        key = str(rule.get("configuration_name") or rule.get("rule"))
        fired = fired_at(rule)
        rows.append(
            [
                f'<a href="#{anchor(key)}">{escape(key)}</a>',
                badge(rule.get("status")),
                escape(
                    ", ".join(fired[:5]) + (f" and {len(fired) - 5} more" if len(fired) > 5 else "")
                    or "—"
                ),
                escape(_why(rule)),
            ]
        )
    header = ["rule", "status", "fired at", "why"]
    return "<nav><h2>Summary</h2>" + table(header, rows) + "</nav>"


def _why(rule: Mapping[str, Any]) -> str:
    """One line on the verdict: the first firing's comparison (its sentence is in the rule's
    section), the error's first line, or what was checked; never cut."""
    evidence = rule.get("evidence") if isinstance(rule.get("evidence"), Mapping) else {}
    reasons = [r for r in (evidence or {}).get("reasons") or [] if isinstance(r, Mapping)]
    if rule.get("status") == "IssuesFound" and reasons:
        r = reasons[0]
        text = (
            f"{chart_family(str(r.get('quantity')))} of {', '.join(r.get('tensors') or [])} "
            f"= {number(as_float(r.get('value')))} ({r.get('comparison')} {r.get('parameter')} "
            f"= {number(as_float(r.get('threshold')))})"
        )
    elif rule.get("status") == "NoIssuesFound":
        text = (
            f"{(evidence or {}).get('comparisons', 0)} comparisons over "
            f"{rule.get('steps_evaluated')} steps, none met the condition"
        )
    else:
        lines = str(rule.get("details") or "").strip().splitlines()
        text = lines[0] if lines else ""
    return text
