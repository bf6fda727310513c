"""The look of every report page: one stylesheet, the document around a body, and the small
HTML pieces (escaping, key/value tables, status badges) the sections are made of.

A page is one self-contained file: the stylesheet is inline and, on a page with charts, the
chart scripts too (uPlot and ours, from ``static/``); its Content-Security-Policy forbids any
fetch (no script, font, stylesheet or image from anywhere), so it opens offline and from disk."""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable
from functools import cache
from importlib import resources

from evaluator.redaction import escape_html

__all__ = [
    "badge",
    "chart_assets",
    "document",
    "escape",
    "inline_json",
    "key_values",
    "number",
    "table",
]

# Nothing leaves the page: inline styles and scripts only, images from data: URIs.
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'none'"
)

CSS = """
:root{--ink:#1d2329;--muted:#5f6b76;--line:#d9dee3;--soft:#f5f7f9;--fired:#b3261e;
--quiet:#1e7a46;--error:#a15c00;--other:#5f6b76}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
margin:0;background:#fff}
main{max-width:1000px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:1.5em;margin:.2em 0 .4em}h2{font-size:1.2em;margin:1.6em 0 .5em;
border-bottom:1px solid var(--line);padding-bottom:.2em}h3{font-size:1.02em;margin:1.2em 0 .4em}
code,pre{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
code{background:var(--soft);padding:0 .25em;border-radius:3px}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:10px 12px;
white-space:pre-wrap;word-break:break-word}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:14px}
th,td{border-bottom:1px solid var(--line);padding:3px 10px 3px 0;text-align:left;
vertical-align:top}
th{color:var(--muted);font-weight:600;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{border-left:6px solid var(--other);background:var(--soft);padding:12px 16px;
border-radius:0 6px 6px 0;margin:.6em 0 1em}
.verdict.IssuesFound{border-color:var(--fired)}.verdict.NoIssuesFound{border-color:var(--quiet)}
.verdict.Error{border-color:var(--error)}
.verdict p{margin:.3em 0}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;color:#fff;font-weight:600;
font-size:13px;background:var(--other)}
.badge.IssuesFound{background:var(--fired)}.badge.NoIssuesFound{background:var(--quiet)}
.badge.Error{background:var(--error)}
.note{color:var(--muted)}
figure{margin:.6em 0 1.4em}figure img{display:block;max-width:100%;height:auto}
figcaption{color:var(--muted);font-size:13px}
nav ul{padding-left:1.2em}
details summary{cursor:pointer;color:var(--muted)}
.matrix td,table.numbers td{text-align:right;font-variant-numeric:tabular-nums}
table.numbers td.name{text-align:left}
footer{margin-top:3em;color:var(--muted);font-size:12px}
.chart{position:relative;min-height:280px}
.chart .tip{position:absolute;display:none;z-index:10;pointer-events:none;white-space:pre;
background:rgba(255,255,255,.95);border:1px solid var(--line);border-radius:4px;
padding:4px 7px;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;color:var(--ink)}
.legend{font-size:13px;color:var(--muted);margin:.2em 0}
.legend .key{margin-right:14px;display:inline-block;overflow-wrap:anywhere}
.legend i{display:inline-block;width:16px;height:3px;margin:0 5px 3px 0;vertical-align:middle;
background:#444b52}
.legend .dash i{background:repeating-linear-gradient(90deg,#444b52 0 5px,transparent 5px 8px)}
.legend .dot i{width:9px;height:9px;border-radius:50%}
.legend .read i{width:8px;height:8px;border-radius:50%;background:#fff!important;
border:2px solid #444b52}
.legend .ring i{width:11px;height:11px;border-radius:50%;background:none!important;
border:2px solid #b3261e}
table.bars{width:100%;max-width:860px}table.bars td.name{width:38%;word-break:break-all}
table.bars td.track{position:relative;width:48%}
.bars .bar{height:14px;background:#1f6fb4;border-radius:2px}.bars .bar.fired{background:#b3261e}
.bars .limit{position:absolute;top:0;bottom:0;border-left:2px dashed #444b52}
.bars .zero{position:absolute;top:0;bottom:0;border-left:1px solid #5f6b76}
table.bars td.num{text-align:right;font-variant-numeric:tabular-nums}
table.matrix td{padding:3px 10px;min-width:3.2em}table.matrix th{padding-right:10px}
.hist{display:flex;align-items:flex-end;gap:1px;height:140px;max-width:860px;
border-bottom:1px solid var(--line)}.hist .hbar{flex:1;background:#1f6fb4;min-height:1px}
.hist .hbar:hover{background:#b3261e}.haxis{display:flex;justify-content:space-between;
max-width:860px;font-size:12px;color:var(--muted)}
.advice{border-left:4px solid #1f6fb4;background:#f2f7fc;padding:8px 14px;
border-radius:0 6px 6px 0}
"""


@cache
def chart_assets() -> str:
    """The stylesheet and scripts a page with charts carries: uPlot (MIT, ``static/``, with
    its license) and ours, inlined."""
    static = resources.files("evaluator.report") / "static"
    css = (static / "uPlot.min.css").read_text(encoding="utf-8")
    lib = (static / "uPlot.iife.min.js").read_text(encoding="utf-8")
    ours = (static / "charts.js").read_text(encoding="utf-8")
    return f"<style>{css}</style>\n<script>{lib}</script>\n<script>{ours}</script>\n"


escape = escape_html  # every page's: evaluator.redaction.escape_html


def inline_json(value: object) -> str:
    """``value`` as JSON safe inside a ``<script>`` element: ``<``, ``>`` and ``&`` as ``\\u``
    escapes, so no ``</script>`` or ``<!--`` in the data can end or bend the element; every
    other non-ASCII and control character escaped too (U+2028/2029 included)."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def number(value: object) -> str:
    """A number as the reports write it: integers whole, others to 4 significant digits."""
    if isinstance(value, (bool, str)) or value is None:
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    try:
        return f"{float(value):.4g}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)


def badge(status: str | None) -> str:
    text = status or "not started"
    return f'<span class="badge {escape(text)}">{escape(text)}</span>'


def table(
    header: Iterable[str], rows: Iterable[Iterable[str]], *, numeric: Iterable[int] = ()
) -> str:
    """A table of already escaped cells; ``numeric`` columns are right-aligned."""
    right = set(numeric)
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if i in right else f"<td>{c}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def key_values(rows: Iterable[tuple[str, str]]) -> str:
    """A two-column table of a label (escaped here) and an already escaped value."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def document(title: str, body: str, *, footer: str = "") -> str:
    """The whole page around ``body`` (already HTML); the chart scripts come at its end
    when the body holds a chart."""
    foot = f"<footer>{footer}</footer>" if footer else ""
    scripts = chart_assets() if 'class="chart-spec"' in body else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        f"{body}\n{foot}\n</main>\n{scripts}</body>\n</html>\n"
    )
