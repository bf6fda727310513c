"""Well-formed HTML, checked with the standard library's parser: every element closed, in
order (void elements need no end tag), and what the page holds collected: its text, its ids
and how many of each tag (``parse`` reads a page written to a file)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

__all__ = ["VOID", "WellFormed", "parse"]

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
