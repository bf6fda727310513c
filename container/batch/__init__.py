"""``rule-evaluator batch``: many trials, the same rules, one summary.

Modules, bottom-up: ``request`` (the arguments), ``trials`` (the trials a folder or S3 prefix
holds, and their folder names), ``job`` (one job: a single ``rule-evaluator`` run, and whether
an earlier batch finished it), ``engines`` (a local pool of processes, or Ray), ``summary``
(table, CSV, JSON, HTML page, the exit code), ``command`` (the subcommand). See docs/scale.md.
"""

from container.batch.command import main

__all__ = ["main"]
