"""The firing histogram of a TensorBoard trial: drawn from the histogram's logged buckets,
since the log holds no values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluator.report.histogram import firing_histogram
from evaluator.trial import create_trial
from tests.support.tb_logs import tf2_style, torch_style

VALUES = np.random.default_rng(4).normal(size=4000) * 1e-9


@pytest.mark.parametrize("write", [torch_style, tf2_style])
def test_a_logged_histogram_is_drawn_from_its_buckets(write: object, tmp_path: Path) -> None:
    """Counts add up to the logged count; the edges run from the exact min to the exact max."""
    log = write(tmp_path / "run", histograms={"layer.weight.grad": [(0, VALUES), (1, VALUES)]})  # type: ignore[operator]
    trial = create_trial(str(log))
    try:
        name = trial.tensor_names()[0]
        drawn = firing_histogram(trial, [{"tensors": [name], "step": 1}])
    finally:
        trial.close()
    assert drawn is not None and drawn["tensor"] == name and drawn["step"] == 1
    assert sum(drawn["counts"]) == VALUES.size == drawn["size"]
    assert len(drawn["edges"]) == len(drawn["counts"]) + 1
    assert drawn["edges"] == sorted(drawn["edges"])
    assert drawn["low"] == pytest.approx(VALUES.min(), rel=1e-6)
    assert drawn["high"] == pytest.approx(VALUES.max(), rel=1e-6)
