"""CreateXgboostReport: never fires, writes a well-formed self-contained report atomically."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from rules_builtin import registry
from rules_builtin.create_xgboost_report import CreateXgboostReport
from tests.support.html_check import WellFormed, parse

XGBOOST_COLLECTIONS = [
    Collection("metrics", include_regex=["^(train|validation)-"]),
    Collection("feature_importance", include_regex=["^feature_importance/"]),
    Collection("labels", include_regex=["^labels$"]),
    Collection("predictions", include_regex=["^predictions$"]),
    Collection("hyperparameters", include_regex=["^hyperparameters/"]),
]


@pytest.fixture
def make_trial(make_trial: Callable[..., Any]) -> Callable[..., Any]:
    """The shared ``make_trial`` (conftest): TRAIN steps, XGBoost's collections."""

    def make(
        steps: Mapping[int, Mapping[str, object]],
        *,
        name: str | None = None,
        collections: list[Collection] = XGBOOST_COLLECTIONS,
    ) -> Any:
        modes = {step: (ModeKeys.TRAIN, step) for step in steps}
        return make_trial(steps, collections=collections, modes=modes, name=name)

    return make


def xgboost_steps(n: int = 11, *, classification: bool = True) -> dict[int, dict[str, object]]:
    """What the XGBoost hook saves: metrics every step; importances, labels and predictions
    every 5 steps; hyperparameters at step 0."""
    rng = np.random.default_rng(0)
    labels = (
        (np.arange(200) % 3).astype(np.float32)
        if classification
        else rng.normal(size=200).astype(np.float32)
    )
    steps: dict[int, dict[str, object]] = {}
    for s in range(n):
        tensors: dict[str, object] = {
            "train-rmse": np.float32(1 / (s + 1)),
            "validation-rmse": np.float32(1.2 / (s + 1)),
        }
        if s % 5 == 0:
            weights = rng.random(8)
            for i, w in enumerate(weights / weights.sum()):
                tensors[f"feature_importance/weight/f{i}"] = np.float32(w)
                tensors[f"feature_importance/gain/f{i}"] = np.float32(w)
            noise = rng.random(200) < 0.1
            tensors["labels"] = labels
            tensors["predictions"] = (
                np.where(noise, (labels + 1) % 3, labels)
                if classification
                else labels + rng.normal(scale=0.1, size=200).astype(np.float32)
            )
        if s == 0:
            tensors["hyperparameters/max_depth"] = np.int64(5)
            tensors["hyperparameters/objective"] = np.array(["multi:softmax"])
        steps[s] = tensors
    return steps


def report_of(trial: Any, out: Path) -> tuple[Any, WellFormed]:
    """Run the report rule over ``trial`` into ``out``; the invoke result and parsed report."""
    rule = CreateXgboostReport(trial, output_dir=str(out))
    result = invoke_rule(rule, raise_eval_cond=False)
    path = out / "xgboost_report.html"
    assert rule.report_path == path
    return result, parse(path)


def test_registered() -> None:
    """The registry finds CreateXgboostReport by name."""
    assert registry.lookup("createxgboostreport") is CreateXgboostReport


def test_full_trial_report(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """A complete XGBoost trial gives every section, charts, and the rule never fires."""
    trial = make_trial(xgboost_steps(), name="my-xgboost-job")
    result, report = report_of(trial, tmp_path / "out")
    assert result.fired_steps == () and result.steps_evaluated == 11
    text = " ".join(report.text)
    assert "my-xgboost-job" in text and "Feature importance at step 10" in text
    assert {"metrics", "feature-importance", "labels-predictions", "hyperparameters"} <= report.ids
    assert "missing" not in report.ids
    assert report.tags["figure"] >= 4  # rmse lines, two importance types, class distribution
    assert "multi:softmax" in text and "recall" in text and "validation" in text


def test_partial_trial_says_what_is_missing(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """A trial with metrics only still gets a report naming the missing collections."""
    steps = {s: {"train-rmse": np.float32(1.0 / (s + 1))} for s in range(3)}
    trial = make_trial(steps, collections=[])
    result, report = report_of(trial, tmp_path / "out")
    assert result.fired_steps == ()
    text = " ".join(report.text)
    assert "metrics" in report.ids and "missing" in report.ids
    for gap in ("feature_importance", "labels", "predictions", "hyperparameters"):
        assert gap in text
    assert "feature-importance" not in report.ids


def test_trial_without_known_tensors(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """A trial holding nothing the report knows still gives a valid report listing all gaps."""
    trial = make_trial({0: {"loss": np.float32(1)}}, collections=[])
    _, report = report_of(trial, tmp_path / "out")
    assert report.ids >= {"summary", "missing"} and "metrics" not in report.ids


def test_tensors_in_the_report_count_as_checked(
    make_trial: Callable[..., Any], tmp_path: Path
) -> None:
    """A report writer has no firing reason: the tensors whose values went into the report are
    recorded as checked at their steps (every one of the 11 steps has metrics)."""
    rule = CreateXgboostReport(make_trial(xgboost_steps()), output_dir=str(tmp_path / "out"))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    summary = rule.evidence.summary()
    assert summary["reasons"] == [] and summary["firings"] == 0
    assert summary["steps_checked"] == 11 and summary["comparisons"] == 11
    # 2 metrics, 16 importances, labels, predictions and 2 hyperparameters
    assert summary["tensors_checked"] == 2 + 16 + 2 + 2


def test_deep_learning_trial_checks_nothing(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """A trial with no XGBoost tensor records nothing (the report still lists the gaps); the
    error names the XGBoost collections to save."""
    trial = make_trial(
        {s: {"loss": np.float32(1), "dense/kernel": np.ones(3, np.float32)} for s in range(3)},
        collections=[],
    )
    rule = CreateXgboostReport(trial, output_dir=str(tmp_path / "out"))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    assert (tmp_path / "out" / "xgboost_report.html").is_file()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "XGBoost's tensors (metrics, feature_importance/<type>/<feature>" in text
    assert (
        "save the metrics, feature_importance, labels, predictions and hyperparameters "
        "collections with the XGBoost hook" in text
    )


def test_regression_report(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """Real-valued labels give statistics and a residual histogram instead of a matrix."""
    trial = make_trial(xgboost_steps(6, classification=False))
    _, report = report_of(trial, tmp_path / "out")
    text = " ".join(report.text)
    assert "RMSE" in text and "Residuals" in text and "Confusion matrix" not in text


def test_names_are_escaped(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """Markup in the trial name is shown as text, keeping the document well-formed."""
    trial = make_trial({0: {"train-rmse": np.float32(1)}}, name="<b>job</b> & co")
    _, report = report_of(trial, tmp_path / "out")
    assert "<b>job</b> & co" in " ".join(report.text) and "b" not in report.tags


def test_written_atomically_without_leftovers(
    make_trial: Callable[..., Any], tmp_path: Path
) -> None:
    """The temporary file lives in .sagemaker-ignore and is gone after the rename."""
    trial = make_trial(xgboost_steps(3))
    out = tmp_path / "out"
    report_of(trial, out)
    assert list((out / ".sagemaker-ignore").iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == [".sagemaker-ignore", "xgboost_report.html"]


def test_last_step_is_in_the_report(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """After the run the report covers every step up to the last one."""
    trial = make_trial(xgboost_steps(8))
    _, report = report_of(trial, tmp_path / "out")
    assert "8 (steps 0 to 7)" in " ".join(report.text)


def test_default_output_dir() -> None:
    """Without output_dir the report goes under /opt/ml/processing/output/rule."""
    rule = CreateXgboostReport(None)
    assert rule.report_path == Path("/opt/ml/processing/output/rule/xgboost_report.html")


def test_unwritable_output_dir(make_trial: Callable[..., Any], tmp_path: Path) -> None:
    """An output_dir that is a file ends in a ConfigurationError naming the report path."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    trial = make_trial({0: {"train-rmse": np.float32(1)}})
    with pytest.raises(ConfigurationError, match="CreateXgboostReport cannot write"):
        invoke_rule(CreateXgboostReport(trial, output_dir=str(blocker)), raise_eval_cond=False)


def test_finished_trial_is_written_at_first_and_last_step(
    make_trial: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replaying a finished trial writes the report twice: at the first and the last step."""
    from rules_builtin import create_xgboost_report as module

    writes: list[str] = []
    real = module.write_atomically

    def counting(path: Path, data: bytes, *, tmp_dir: Path) -> None:
        writes.append(data.decode("utf-8"))
        real(path, data, tmp_dir=tmp_dir)

    monkeypatch.setattr(module, "write_atomically", counting)
    trial = make_trial(xgboost_steps(12))
    invoke_rule(CreateXgboostReport(trial, output_dir=str(tmp_path / "out")))
    assert len(writes) == 2 and "12 (steps 0 to 11)" in writes[-1]
