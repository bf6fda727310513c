"""A folder of ``*.csv`` files of ``step,tag,value`` rows, read as a rule-evaluator trial.

The format registers itself through the entry point ``csv`` of the group
``rule_evaluator.sources`` (see pyproject.toml): ``FORMAT`` says which listed keys show it and
how its source is opened. Each tag is a tensor, each step a global step; a header line
``step,tag,value`` is optional.
"""

from __future__ import annotations

from csv_format.source import CsvSource
from evaluator.engine.options import TrialOptions
from evaluator.sources import SourceFormat
from evaluator.storage.base import Storage

__all__ = ["FORMAT", "CsvSource"]


def _make(storage: Storage, options: TrialOptions) -> CsvSource:
    return CsvSource(storage, options)


FORMAT = SourceFormat("csv", lambda key: key.endswith(".csv"), _make)
