"""GradientNormSpike on a Hugging Face-style log (train/grad_norm), on Lightning's total norm, and
on smdebug trials holding gradient tensors (their global L2 norm)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.formats import Collection
from evaluator.rules import invoke_rule
from evaluator.rules.loader import build_rule
from rules_builtin import registry
from tests.unit.rules_builtin.stability_logs import log, run


def _norms(n: int, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in rng.lognormal(0.0, 0.4, n)]


def test_default_fires_on_the_second_value_of_a_x20_spike(tmp_path: Path) -> None:
    """x20 for 2 logged values fires at the second (patience 2); quiet without it."""
    norms = _norms(100)
    assert run(log(tmp_path / "quiet", {"train/grad_norm": norms}), "GradientNormSpike").fired == []
    norms[60:62] = [20 * v for v in norms[60:62]]
    result = run(log(tmp_path / "spike", {"train/grad_norm": norms}), "GradientNormSpike")
    assert result.fired == [620]
    assert result.checks[0].tensors == ("grad_norm",)
    assert result.checks[0].diagnosis is not None
    assert result.checks[0].diagnosis.kind == "transient"


def test_lightning_total_norm_is_the_series(tmp_path: Path) -> None:
    """Lightning's grad_2.0_norm_total is followed; its per-parameter norms are not pooled."""
    norms = _norms(60)
    norms[40:] = [30 * v for v in norms[40:]]
    series = {"grad_2.0_norm_total": norms, "grad_2.0_norm/fc1.weight": _norms(60, seed=3)}
    result = run(log(tmp_path, series), "GradientNormSpike")
    assert result.fired[0] == 420
    assert {c.tensors for c in result.checks} == {("grad_2.0_norm_total",)}
    assert result.checks[0].diagnosis is not None
    assert result.checks[0].diagnosis.kind == "diverging"


def test_olmo_definition(tmp_path: Path) -> None:
    """OLMo-core's definition on gradient norms: 128 values alternating 1.0 and 1.2 put the
    bound at 1.7; 2.0 is a spike at the first check."""
    norms = [1.0 if i % 2 == 0 else 1.2 for i in range(128)] + [2.0]
    folder = log(tmp_path, {"train/grad_norm": norms})
    assert run(folder, "GradientNormSpike", definition="olmo").fired == [1290]


def test_global_norm_of_smdebug_gradients(make_trial: Callable[..., Any]) -> None:
    """On an smdebug trial the global L2 norm of the gradients collection is the series:
    sqrt(|a|^2 + |b|^2), and a x20 jump of both tensors for 2 steps fires at the second."""
    rng = np.random.default_rng(4)
    steps = {}
    for s in range(40):
        scale = 20.0 if s in (30, 31) else 1.0
        steps[s] = {
            "gradients/a": (scale * rng.normal(0, 1, 8)).astype(np.float32),
            "gradients/b": (scale * rng.normal(0, 1, 4)).astype(np.float32),
        }
    trial = make_trial(steps, collections=[Collection("gradients", include_regex=["^gradients/"])])
    rule = build_rule(registry.lookup("GradientNormSpike"), trial, {})
    result = invoke_rule(rule, raise_eval_cond=False)
    assert result.fired_steps[0] == 31
    (check,) = rule.evidence.firings_at(31)
    assert check.tensors == ("gradients (global L2 norm)",)
    a, b = steps[31]["gradients/a"], steps[31]["gradients/b"]
    want = math.sqrt(float(np.dot(a, a)) + float(np.dot(b, b)))
    assert check.diagnosis is not None
    assert math.isclose(float(check.diagnosis.figures["value"]), want, rel_tol=1e-5)


def test_no_gradient_norm_checks_nothing(tmp_path: Path) -> None:
    """A log with a loss but no gradient norm ends "checked nothing", never quiet."""
    assert run(log(tmp_path, {"train/loss": _norms(30)}), "GradientNormSpike").nothing
