"""The rule report as a person sees it, in a real headless browser (Debian's chromium): a
firing VanishingGradient, a NoIssuesFound and an Error each render (screenshot not blank),
cause no console message, and show the tensor and the step; the charts answer the pointer
(hover: step and value at the firing marker; drag: zoom) and fetch nothing; a 2000-step
run's report is small and opens fast. Without chromium these tests skip loudly (fail when
CI=true)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.report import REPORT_FILE_NAME
from tests.report.browser import chromium, non_blank_share, open_page, probe_page
from tests.report.conftest import SHORT_VANISHES_AT
from tests.report.harness import ReportRun, evaluate_with_report
from tests.report.trials import VANISHING_TENSOR, write_fading_gradients

LONG_STEPS, LONG_VANISHES_AT = 2000, 1990
MAX_OPEN_MS = 2000.0  # the bound; measured by the browser itself
MAX_BYTES = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def browser() -> str:
    return chromium()


def _text(dom: str) -> str:
    """The DOM with tags kept (names sit in <code> cells): enough to find text in."""
    return dom.replace("&gt;", ">").replace("&lt;", "<")


def test_firing_report_in_the_browser(browser: str, firing_run: ReportRun, tmp_path: Path) -> None:
    """A firing VanishingGradient: a drawn page, no console message, tensor and step shown."""
    view = open_page(browser, firing_run.output_dir / REPORT_FILE_NAME, tmp_path)
    assert non_blank_share(view.screenshot) > 0.02
    assert view.console == []
    dom = _text(view.dom)
    assert VANISHING_TENSOR in dom and f"fired at step {SHORT_VANISHES_AT}." in dom
    assert "IssuesFound" in dom


def test_quiet_report_in_the_browser(browser: str, quiet_run: ReportRun, tmp_path: Path) -> None:
    """NoIssuesFound: a drawn page, no console message, the closest tensor and its step."""
    view = open_page(browser, quiet_run.output_dir / REPORT_FILE_NAME, tmp_path)
    assert non_blank_share(view.screenshot) > 0.02
    assert view.console == []
    dom = _text(view.dom)
    assert "NoIssuesFound" in dom and VANISHING_TENSOR in dom
    assert f"closest: 5e-08 at step {SHORT_VANISHES_AT}" in dom


def test_error_report_in_the_browser(browser: str, error_run: ReportRun, tmp_path: Path) -> None:
    """Error: a drawn page, no console message, the ClientError and the trial's tensors."""
    view = open_page(browser, error_run.output_dir / REPORT_FILE_NAME, tmp_path)
    assert non_blank_share(view.screenshot) > 0.02
    assert view.console == []
    dom = _text(view.dom)
    assert "ClientError: Insufficient information to invoke rule AllZero" in dom
    assert "What to fix" in dom and VANISHING_TENSOR in dom


def test_hover_shows_the_step_and_value_at_the_firing_marker(
    browser: str, firing_run: ReportRun, tmp_path: Path
) -> None:
    """The firing marker sits on the firing step; the pointer there shows the step, the
    tensor's value and the threshold; the page fetched nothing."""
    seen = probe_page(browser, firing_run.output_dir / REPORT_FILE_NAME, tmp_path)
    assert seen["charts"] == 1 and seen["failed"] is False
    assert seen["firedSteps"] == [SHORT_VANISHES_AT]
    assert seen["hoverStep"] == SHORT_VANISHES_AT
    tip = str(seen["tip"])
    assert f"step {SHORT_VANISHES_AT}" in tip and f"{VANISHING_TENSOR}: 5e-8" in tip
    assert "threshold: 1e-7" in tip and "fired here" in tip
    assert seen["resources"] == []


def test_dragging_across_a_chart_zooms_on_those_steps(
    browser: str, quiet_run: ReportRun, tmp_path: Path
) -> None:
    """A drag from one step to another narrows the x axis to about that range."""
    seen = probe_page(browser, quiet_run.output_dir / REPORT_FILE_NAME, tmp_path)
    low, high = seen["dragged"]  # type: ignore[misc]
    zoom_low, zoom_high = seen["zoom"]  # type: ignore[misc]
    assert seen["allSteps"] != seen["zoom"]
    assert abs(zoom_low - low) <= 1 and abs(zoom_high - high) <= 1


def test_console_messages_are_caught(browser: str, tmp_path: Path) -> None:
    """The console check works: a page that logs an error and throws is caught twice."""
    page = tmp_path / "faulty.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>x</p><script>console.error('boom');"
        "throw new Error('thrown');</script></body></html>"
    )
    view = open_page(browser, page, tmp_path / "view")
    assert any("boom" in line for line in view.console)
    assert any("thrown" in line for line in view.console)


def test_report_of_a_2000_step_run_is_small_and_opens_fast(
    browser: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A 2000-step run's report is under 2 MB and the browser loads it in under 2 s."""
    trial = write_fading_gradients(
        tmp_path_factory.mktemp("long") / "trial", steps=LONG_STEPS, vanishes_at=LONG_VANISHES_AT
    )
    run = evaluate_with_report(
        ["--trial-dir", str(trial), "--rule", "VanishingGradient"], tmp_path_factory.mktemp("out")
    )
    report = run.output_dir / REPORT_FILE_NAME
    assert run.exit_code == 1 and report.stat().st_size < MAX_BYTES
    view = open_page(browser, report, tmp_path_factory.mktemp("view"))
    assert view.console == []
    assert view.load_ms is not None and view.load_ms < MAX_OPEN_MS
    assert f"fired at step {LONG_VANISHES_AT}." in _text(view.dom)
