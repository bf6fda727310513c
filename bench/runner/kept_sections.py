"""The sections of RESULTS.md that other benches write (bench/tb_log.py's TensorBoard section,
bench/s3_before_after.py's S3 comparison), carried over when run.py rewrites the file."""

from __future__ import annotations

import os

__all__ = ["kept_sections"]

# Sections run.py itself writes after the kept ones (never carried over).
_OWN_LAST = ("## Machine and software", "## Reproduce", "## Problems")


def kept_sections(path: str, written: list[str]) -> list[str]:
    """The sections other benches wrote into RESULTS.md (bench/tb_log.py's TensorBoard
    section, bench/s3_before_after.py's S3 comparison): every ``## `` section of the file as
    it is whose heading run.py does not write (not in ``written``, nor one of ``_OWN_LAST``),
    with the ``<!-- ... -->`` marker lines just above its heading, carried over as it is."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().splitlines()
    own = {line for line in written if line.startswith("## ")} | set(_OWN_LAST)
    sections: list[list[str]] = []
    for i, line in enumerate(lines):
        starts = line.startswith("## ") or (
            line.startswith("<!--") and i + 1 < len(lines) and lines[i + 1].startswith("## ")
        )
        if starts and not (sections and sections[-1][-1].startswith("<!--")):
            sections.append([])
        if sections:
            sections[-1].append(line)
    kept: list[str] = []
    for section in sections:
        heading = next(line for line in section if line.startswith("## "))
        if heading not in own:
            kept.extend(section)
            if section[-1] != "":
                kept.append("")
    return kept
