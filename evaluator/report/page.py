"""The look of every report page: one stylesheet, the document around a body, and the small
HTML pieces (escaping, key/value tables, status badges) the sections are made of.

A page is one self-contained file: the stylesheet is inline, charts are embedded images, and
nothing is fetched (no script, font or stylesheet from the network), so it opens offline."""

from __future__ import annotations

import html
import numbers
from collections.abc import Iterable

__all__ = ["badge", "document", "escape", "key_values", "number", "table"]

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
"""


def escape(value: object) -> str:
    return html.escape(str(value), quote=True)


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
    """The whole page around ``body`` (already HTML)."""
    foot = f"<footer>{footer}</footer>" if footer else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n"
        f"{body}\n{foot}\n</main>\n</body>\n</html>\n"
    )
