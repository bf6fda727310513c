"""A query that matches no tensor warns once per process, not at every step (issue 26,
friction 9)."""

from __future__ import annotations

import logging

import pytest

from evaluator.trial import names


def test_the_same_empty_query_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked ten times, an empty collection gives one warning; another query its own."""
    monkeypatch.setattr(names, "_SAID", set())
    with caplog.at_level(logging.DEBUG, logger="evaluator.trial"):
        for _ in range(10):
            names._no_match(None, "biases")
        names._no_match("relu", None)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage().split(" (said")[0] for r in warnings] == [
        "tensor_names: no tensor matches regex=None collection='biases'",
        "tensor_names: no tensor matches regex='relu' collection=None",
    ]
    assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 9
