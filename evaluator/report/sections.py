"""One rule's part of the report: the verdict with its reason, the charts of what the rule
tested, what to fix after an Error with the trial's summary, the parameters and the timings.
Everything comes from the result file's entry for the rule and its data file entry; the
charts are drawn by ``evaluator.report.section_charts``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from evaluator.report.advice import CURVES, VALIDATION, advice_for
from evaluator.report.charts import as_float
from evaluator.report.html_charts import firing_values
from evaluator.report.page import badge, escape, key_values, number, table
from evaluator.report.section_charts import MAX_CHARTS, curves, span, tested_charts

__all__ = ["MAX_CHARTS", "anchor", "rule_section"]

MAX_REASONS = 20
# The fields of a reason the table shows in its own columns; any other (a rule's diagnosis,
# say) is shown as it is.
_CHECK_FIELDS = frozenset(
    {"step", "mode", "mode_step", "global_step", "worker", "tensors", "quantity", "value"}
    | {"comparison"}
    | {"parameter", "threshold", "sentence"}
    # a loss-progress rule's diagnosis, shown once below the table (``note``: a firing kept
    # as a note, which the notes list shows)
    | {"diagnosis", "explanation", "diagnosis_figures", "note"}
)

# What to do about an Error, by error type (the message itself names the thing to fix).
_ADVICE = {
    "InsufficientInformationForRuleInvocation": (
        "The rule found nothing to check. Compare its tensor selection (regex or collection "
        "parameters) with the collections and tensors the trial holds, below; or save the "
        "collection it needs with the debugger hook."
    ),
    "ConfigurationError": "Fix the parameter the message names, then run the rule again.",
    "RuleCodeError": "The rule's own code raised: the traceback below shows where.",
    "MissingCollectionFiles": (
        "The training job saved no debugging data at this path: check the debugger hook's "
        "configuration (its output path or out_dir) and the trial path given to the rule."
    ),
    "CollectionFilesTimeout": (
        "No collection files appeared in time: check that the training job is writing to "
        "this path, or raise collection_wait_timeout."
    ),
}
_DEFAULT_ADVICE = "The message above names what to fix; the trial's summary is below."


def anchor(key: str) -> str:
    return "rule-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in key)


def rule_section(rule: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    """The HTML section of one rule (an entry of the result file's ``rules``)."""
    key = str(rule.get("configuration_name") or rule.get("rule"))
    evidence = rule.get("evidence") if isinstance(rule.get("evidence"), Mapping) else {}
    status = str(rule.get("status") or "")
    series, run = data.get("series") or [], data.get("run") or []
    drawn = curves(rule, series, run)
    parts = [
        f'<section id="{anchor(key)}">',
        f"<h2>{escape(key)} {badge(status)}</h2>",
        _verdict(rule, evidence or {}),
        _advice(rule, _shown(drawn, series, run)),
        drawn,
        firing_values(data.get("histogram")),
        tested_charts(status, evidence or {}, series, span(series, run)),
    ]
    if status == "Error":
        parts.append(_error(rule, data.get("trial_summary")))
    parts += [_parameters(rule), _timings(rule, evidence or {}), "</section>"]
    return "\n".join(p for p in parts if p)


# ---------------------------------------------------------------- verdict


def _verdict(rule: Mapping[str, Any], evidence: Mapping[str, Any]) -> str:
    status = str(rule.get("status") or "InProgress")
    reasons = [r for r in evidence.get("reasons") or [] if isinstance(r, Mapping)]
    lines = [
        f"<p>{badge(status)} <strong>{escape(rule.get('rule'))}</strong> {_headline(rule)}</p>"
    ]
    if status == "IssuesFound" and reasons:
        lines.append(f"<p>{escape(_finding(reasons[0]))}</p>")
    elif status == "Error" and rule.get("details"):
        lines.append(f"<pre>{escape(str(rule['details']).strip())}</pre>")
    elif rule.get("details"):
        lines.append(f"<p>{escape(str(rule['details']).strip())}</p>")
    body = f'<div class="verdict {escape(status)}">{"".join(lines)}</div>'
    if reasons:
        body += "<h3>Why it fired</h3>" + _checks_table(reasons[:MAX_REASONS])
        more = int(evidence.get("firings") or 0) - min(len(reasons), MAX_REASONS)
        if more > 0:
            body += f'<p class="note">and {more} more firing comparison(s).</p>'
        diagnosed = [r for r in reasons if r.get("diagnosis")]
        if diagnosed:  # a loss-progress rule's reading of its first firing
            body += _diagnosis(diagnosed[0])
    notes = [n for n in evidence.get("notes") or [] if isinstance(n, Mapping)]
    if notes:
        count = int(evidence.get("note_count") or len(notes))
        body += (
            f"<h3>Notes ({count})</h3><p>Firings the rule kept as notes, not issues "
            "(the loss converged and <code>ignore_converged</code> is set):</p>"
            + "".join(f"<p>{escape(n.get('sentence') or '')}</p>" for n in notes[:3])
        )
    if not reasons and status == "NoIssuesFound" and evidence.get("closest"):
        body += (
            "<h3>Closest approach</h3><p>The comparison that came nearest to firing, per "
            "parameter:</p>" + _checks_table(evidence["closest"])
        )
    return body


def _finding(reason: Mapping[str, Any]) -> str:
    """A firing's sentence without its diagnosis' explanation (the diagnosis, below the
    table, says it once)."""
    sentence = str(reason.get("sentence") or "")
    explanation = str(reason.get("explanation") or "")
    if reason.get("diagnosis") and explanation and sentence.endswith(explanation):
        sentence = sentence[: -len(explanation)].rstrip(" :;,")
    return sentence


def _diagnosis(reason: Mapping[str, Any]) -> str:
    """What the loss did (a loss-progress rule's diagnosis), its explanation and the figures
    that decided it, as a small labelled table."""
    name = str(reason.get("diagnosis")).replace("_", " ")
    text = f"<p><strong>Diagnosis: {escape(name)}</strong>: {escape(reason.get('explanation') or '')}</p>"
    figures = reason.get("diagnosis_figures")
    if isinstance(figures, Mapping) and figures:
        text += figures_table(figures)
    return text


# A figure of the other loss beside its twin (a loss-progress diagnosis names one side's figures
# plainly, the other's with a prefix): the prefix and the column the plain figures go in.
_TWINS = {"validation_": "training", "training_": "validation"}


def figures_table(figures: Mapping[str, Any]) -> str:
    """Named figures as a labelled table, names in words (``fall_percent``: Fall (%)); a
    loss-progress diagnosis' figures of the training and the validation loss
    (``validation_x`` beside ``x``, or ``training_x`` beside ``x``) in two columns."""
    prefix = next((p for p in _TWINS if any(str(k).startswith(p) for k in figures)), None)
    if prefix is None:
        rows = [[escape(_words(str(k))), _cell(v)] for k, v in figures.items()]
        return table(["figure", "value"], rows, numeric=[1])
    plain_first = _TWINS[prefix] == "training"  # the columns: training, then validation
    names = list(dict.fromkeys(str(k).removeprefix(prefix) for k in figures))
    rows = []
    for name in names:
        plain, twin = figures.get(name), figures.get(prefix + name)
        cells = [_cell(plain) if plain is not None else "", _cell(twin) if twin is not None else ""]
        rows.append([escape(_words(name)), *(cells if plain_first else cells[::-1])])
    return table(["figure", "training", "validation"], rows, numeric=[1, 2])


def _words(key: str) -> str:
    text = key.replace("_percent", " (%)").replace("_", " ")
    return text[:1].upper() + text[1:] if text else text


def _cell(value: Any) -> str:
    """A figure in a table cell: a number as the report writes it, a list or mapping as a
    nested labelled table, never as a dump."""
    if isinstance(value, Mapping):
        return figures_table(value)
    if isinstance(value, (list, tuple)):
        return escape(", ".join(number(v) for v in value))
    return escape(number(value) if value is not None else "")


def fired_at(rule: Mapping[str, Any]) -> list[str]:
    """The firing steps as shown: ``500``, or ``EVAL step 100`` for a step the writer logged
    in a mode (``fired_modes``)."""
    fired = rule.get("fired_steps") or []
    modes = rule.get("fired_modes") or [None] * len(fired)
    return [f"{m} step {s}" if m else str(s) for s, m in zip(fired, modes, strict=False)]


def _headline(rule: Mapping[str, Any]) -> str:
    status = rule.get("status")
    fired = fired_at(rule)
    if status == "IssuesFound" and fired:
        shown = ", ".join(fired[:10])
        more = f" and {len(fired) - 10} more" if len(fired) > 10 else ""
        if rule.get("fired_modes"):  # each names its mode: "EVAL step 7"
            return f"fired at {escape(shown)}{more}."
        return f"fired at step{'s' if len(fired) > 1 else ''} {escape(shown)}{more}."
    if status == "NoIssuesFound":
        return f"did not fire in {escape(rule.get('steps_evaluated'))} evaluated steps."
    if status == "Error":
        return "ended with an error."
    if status == "InProgress":
        return f"is running (step {escape(rule.get('step'))})."
    return f"ended {escape(status)}."


def _shown(
    drawn: str, series: Sequence[Mapping[str, Any]], run: Sequence[Mapping[str, Any]]
) -> frozenset[str]:
    """What the page draws that advice may refer to (``advice.CURVES``, ``VALIDATION``)."""
    if not drawn:
        return frozenset()
    watched = [s for s in series if s.get("parameter") is None]
    modes = {s.get("mode") for s in [*watched, *run]}
    return frozenset({CURVES, *([VALIDATION] if "EVAL" in modes else [])})


def _advice(rule: Mapping[str, Any], shown: frozenset[str]) -> str:
    """What to try after a firing (the evidence is in the table above it)."""
    if rule.get("status") != "IssuesFound":
        return ""
    meaning, *steps = advice_for(str(rule.get("rule") or ""), shown)
    items = "".join(f"<li>{escape(t)}</li>" for t in steps)
    lead = f"<p>{escape(meaning)}</p>" if meaning else ""
    return f'<h3>What to try</h3><div class="advice">{lead}<ul>{items}</ul></div>'


def _where(check: Mapping[str, Any]) -> str:
    """``step 500``, or ``EVAL step 100`` for a step the writer logged in a mode."""
    if "global_step" in check:
        return f"{check.get('mode')} step {check.get('step')}"
    return f"step {check.get('step')}"


def _checks_table(checks: Sequence[Mapping[str, Any]]) -> str:
    extra = sorted({k for c in checks for k in c if k not in _CHECK_FIELDS})
    rows = []
    for c in checks:
        mode = c.get("mode")
        if "global_step" in c:  # a step the writer logged in a mode
            where = f"{escape(mode)} {escape(c.get('step'))}"
        elif mode not in (None, "GLOBAL"):
            where = f"{escape(c.get('step'))} ({escape(mode)} {escape(c.get('mode_step'))})"
        else:
            where = escape(c.get("step"))
        rows.append(
            [
                where,
                "<br>".join(f"<code>{escape(t)}</code>" for t in c.get("tensors") or []),
                escape(c.get("quantity")),
                escape(number(as_float(c.get("value")))),
                escape(f"{c.get('comparison')} {c.get('parameter')} = ")
                + escape(number(as_float(c.get("threshold")))),
                *(_cell(c.get(k)) for k in extra),
            ]
        )
    header = ["step", "tensor", "quantity", "value", "fires when", *map(_words, extra)]
    return table(header, rows, numeric=[3])


# ---------------------------------------------------------------- error


def _error(rule: Mapping[str, Any], summary: Mapping[str, Any] | None) -> str:
    error_type = str(rule.get("error_type") or "")
    parts = [
        "<h3>What to fix</h3>",
        f"<p>{escape(_ADVICE.get(error_type, _DEFAULT_ADVICE))}</p>",
    ]
    if rule.get("traceback"):
        parts.append(
            f"<details><summary>Traceback</summary><pre>{escape(rule['traceback'])}</pre></details>"
        )
    parts.append("<h3>What the trial holds</h3>")
    parts.append(trial_summary(summary))
    return "\n".join(parts)


def trial_summary(summary: Mapping[str, Any] | None) -> str:
    """The trial's collections, tensors and steps per mode (``evaluator.summary``)."""
    if not summary:
        return '<p class="note">No summary: the trial could not be read by this run.</p>'
    if "error" in summary:
        return f'<p class="note">No summary: {escape(summary["error"])}</p>'
    per_mode = summary.get("steps_per_mode") or {}
    collections = summary.get("collections") or {}
    tensors = summary.get("tensors") or {}
    rows = [
        ("path", f"<code>{escape(summary.get('path'))}</code>"),
        ("training ended", "yes" if summary.get("training_ended") else "no (or no end marker)"),
        ("workers", escape(summary.get("num_workers"))),
        ("steps", f"{escape(summary.get('steps'))} ({escape(_step_ranges(summary))})"),
        ("steps per mode", escape(", ".join(f"{m} {n}" for m, n in per_mode.items()) or "none")),
    ]
    out = key_values(rows)
    out += "<h3>Collections</h3>" + (
        table(
            ["collection", "tensors"],
            [[f"<code>{escape(c)}</code>", escape(n)] for c, n in collections.items()],
            numeric=[1],
        )
        if collections
        else '<p class="note">none</p>'
    )
    left = summary.get("tensors_left_out")
    out += f"<h3>Tensors ({len(tensors) + int(left or 0)})</h3>" + (
        table(
            ["tensor", "steps saved"],
            [[f"<code>{escape(t)}</code>", escape(n)] for t, n in tensors.items()],
            numeric=[1],
        )
        if tensors
        else '<p class="note">none</p>'
    )
    if left:
        out += f'<p class="note">and {escape(left)} more tensors.</p>'
    return out


def _step_ranges(summary: Mapping[str, Any]) -> str:
    """The trial's steps as users see them: per mode, the first and last step the writer
    logged where those are not the global steps (``logged_steps``: a run with phases), else
    the global steps (docs/compatibility.md, "Steps users see")."""
    logged = summary.get("logged_steps")
    if logged:
        return ", ".join(f"{mode} steps {first}..{last}" for mode, (first, last) in logged.items())
    return f"global steps {summary.get('first_step')}..{summary.get('last_step')}"


# ---------------------------------------------------------------- parameters and timings


def _parameters(rule: Mapping[str, Any]) -> str:
    params = rule.get("parameters") or {}
    if not params:
        return ""
    rows = [[f"<code>{escape(k)}</code>", f"<code>{escape(v)}</code>"] for k, v in params.items()]
    return "<h3>Parameters</h3>" + table(["parameter", "effective value"], rows)


def _timings(rule: Mapping[str, Any], evidence: Mapping[str, Any]) -> str:
    started, finished = rule.get("started_at"), rule.get("finished_at")
    rows = [
        ("started", escape(started or "not started")),
        ("finished", escape(finished or "running")),
        ("duration", escape(_duration(started, finished))),
        ("steps evaluated", escape(rule.get("steps_evaluated"))),
    ]
    for label, field in (
        ("comparisons", "comparisons"),
        ("tensors checked", "tensors_checked"),
        ("tensor values read", "tensor_values_read"),
    ):
        if field in evidence:
            rows.append((label, escape(evidence[field])))
    return "<h3>Run</h3>" + key_values(rows)


def _duration(started: Any, finished: Any) -> str:
    try:
        a = datetime.fromisoformat(str(started).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(finished).replace("Z", "+00:00"))
    except ValueError:
        return "n/a"
    return f"{(b - a).total_seconds():.1f} s"
