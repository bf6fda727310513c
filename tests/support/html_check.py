"""Well-formed HTML, checked with the standard library's parser: every element closed, in
order (void elements need no end tag), and what the page holds collected: its text, its ids
and how many of each tag (``parse`` reads a page written to a file); ``index_rows`` reads the
rows of the batch's (and the watch's) ``index.html``: what each row's first cell shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

__all__ = ["VOID", "IndexRow", "WellFormed", "index_rows", "parse"]

# Elements without an end tag (the HTML standard's void elements).
VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


class WellFormed(HTMLParser):
    """Checks that every element is closed, in order; collects the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []
        self.ids: set[str] = set()
        self.tags: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.ids |= {v for k, v in attrs if k == "id" and v}
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(path: Path) -> WellFormed:
    """Parse the report, asserting it is a well-formed HTML document."""
    document = path.read_text(encoding="utf-8")
    assert document.startswith("<!DOCTYPE html>")
    parser = WellFormed()
    parser.feed(document)
    parser.close()
    assert parser.errors == [] and parser.stack == []
    return parser


@dataclass
class IndexRow:
    """A row of the index: its first cell's text (the link's and the secondary line's), the
    link's target and title attribute, and the status cell."""

    label: str = ""
    href: str | None = None
    hint: str | None = None  # the link's title attribute
    secondary: str = ""  # the cell's <small> line
    cells: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.cells[1] if len(self.cells) > 1 else ""


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[IndexRow] = []
        self._in: list[str] = []  # open tags inside the current body row

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr" and "tbody" in self._in:
            self.rows.append(IndexRow())
        if self.rows and tag == "a" and len(self.rows[-1].cells) == 1:
            self.rows[-1].href, self.rows[-1].hint = (
                dict(attrs).get("href"),
                dict(attrs).get("title"),
            )
        if tag == "td" and self.rows:
            self.rows[-1].cells.append("")
        if tag not in VOID:
            self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._in:
            del self._in[len(self._in) - 1 - self._in[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        if not self.rows or not self.rows[-1].cells or "td" not in self._in:
            return
        row = self.rows[-1]
        row.cells[-1] += data
        if len(row.cells) == 1:
            if "small" in self._in:
                row.secondary += data
            else:
                row.label += data


def index_rows(path: Path) -> list[IndexRow]:
    """The body rows of the index page at ``path``."""
    parser = _Rows()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.rows
