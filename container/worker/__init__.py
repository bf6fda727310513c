"""One evaluation process serving many watched runs whose rules are all built-in (the
``watch`` subcommand's shared worker): ``serve`` (the process and its control channel),
``run`` (one run in it, exactly a single run's evaluation), ``routing`` (each run's output
to its own log)."""

from __future__ import annotations

from container.worker.serve import main

__all__ = ["main"]
