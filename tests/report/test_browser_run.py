"""The report draws the run, not only what the rule read, as a person sees it in Debian's
headless chromium: LossNotDecreasing on a 200-step TensorBoard log written by tensorboardX
reads 11 training values before it fires, yet the page draws all 200 training values and
the validation curve, what the rule tested on an axis that shows 0, and no caption holds
"..." or "…"; the advice names no curve the page does not draw. Without chromium these
tests skip loudly (fail when CI=true)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluator.report import REPORT_FILE_NAME
from tests.report.browser import chromium, drawn_charts, open_page
from tests.report.harness import ReportRun, evaluate_with_report
from tests.report.trials import write_flat_loss_run

STEPS, EVAL_EVERY = 200, 10


@pytest.fixture(scope="module")
def browser() -> str:
    return chromium()


@pytest.fixture(scope="module")
def flat_run(tmp_path_factory: pytest.TempPathFactory) -> ReportRun:
    run = write_flat_loss_run(tmp_path_factory.mktemp("flat"), steps=STEPS)
    return evaluate_with_report(
        ["--trial-dir", str(run), "--rule", "LossNotDecreasing"], tmp_path_factory.mktemp("out")
    )


def _lines(seen: dict[str, Any], chart: int) -> dict[str, int]:
    return {s["label"]: s["values"] for s in seen["charts"][chart]["series"]}


def test_loss_not_decreasing_draws_the_whole_run_in_every_mode(
    browser: str, flat_run: ReportRun, tmp_path: Path
) -> None:
    """All 200 training values and the 20 validation values are on the loss chart; the
    rule's reads (fewer: it stops at its firing) are dots on them; the firing is marked."""
    assert flat_run.exit_code == 1
    seen = drawn_charts(browser, flat_run.output_dir / REPORT_FILE_NAME, tmp_path)
    assert seen["failed"] is False
    lines = _lines(seen, 0)
    assert lines["loss, training (TRAIN)"] == STEPS
    assert lines["loss, validation (EVAL)"] == STEPS // EVAL_EVERY
    read = lines["loss, training (TRAIN), read by the rule"]
    assert 0 < read < STEPS  # what the rule read is highlighted, not all that is drawn
    assert lines["fired"] == 1
    first, last = seen["charts"][0]["x"]
    assert first <= 0 and last >= STEPS - 1  # the axis covers the run (the logged steps)


def test_what_the_rule_tested_is_drawn_over_the_run_with_zero_in_sight(
    browser: str, flat_run: ReportRun, tmp_path: Path
) -> None:
    """The tested quantity (decrease (%), one value at the firing step) is drawn with its
    threshold over the run's steps, on a value axis that holds 0 and whose title is not cut
    (its caption names the comparison in full)."""
    seen = drawn_charts(browser, flat_run.output_dir / REPORT_FILE_NAME, tmp_path)
    tested = seen["charts"][1]
    low, high = tested["y"]
    assert low <= 0 <= high
    assert tested["x"][1] >= STEPS - 1
    assert {s["role"] for s in tested["series"]} >= {"line", "threshold", "fired"}
    assert tested["axes"] == ["step", "decrease (%) of the loss"]


def test_no_caption_holds_an_ellipsis_and_each_sentence_is_said_once(
    browser: str, flat_run: ReportRun, tmp_path: Path
) -> None:
    seen = drawn_charts(browser, flat_run.output_dir / REPORT_FILE_NAME, tmp_path)
    captions = seen["captions"]
    assert captions and not [c for c in captions if "..." in c or "…" in c]
    dom = open_page(browser, flat_run.output_dir / REPORT_FILE_NAME, tmp_path / "view").dom
    explanation = "the loss has not fallen"
    assert dom.count(explanation) == 1
    assert "start: " not in dom and "note: False" not in dom  # no raw dump of figures
    assert "Flat steps" in dom  # the figures as a labelled table


def test_advice_names_only_what_the_page_draws(
    browser: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Without a validation loss in the log, the advice never sends the reader to a
    validation curve; with one, it does."""
    run = write_flat_loss_run(tmp_path_factory.mktemp("train-only"), validation=False)
    alone = evaluate_with_report(
        ["--trial-dir", str(run), "--rule", "LossNotDecreasing"], tmp_path_factory.mktemp("out")
    )
    assert alone.exit_code == 1
    page = (alone.output_dir / REPORT_FILE_NAME).read_text(encoding="utf-8")
    assert "validation curve" not in page and "What to try" in page
    seen = drawn_charts(browser, alone.output_dir / REPORT_FILE_NAME, tmp_path_factory.mktemp("v"))
    assert not any("EVAL" in label for label in _lines(seen, 0))
