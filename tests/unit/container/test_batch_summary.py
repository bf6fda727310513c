"""The batch summary (container.batch.summary): the worst outcome's exit code, and a page
that shows the user's trial paths and messages as text."""

from __future__ import annotations

import json
from pathlib import Path

from container.batch.job import JobOutcome
from container.batch.summary import format_table, worst_exit_code, write_summary


def outcome(name: str, status: str, code: int, message: str | None = None) -> JobOutcome:
    return JobOutcome(
        name=name, trial=f"s3://b/{name}", status=status, exit_code=code, message=message
    )


def test_worst_outcome_order() -> None:
    """Stopped beats an internal error, which beats a client error, then issues found, then
    no issues; no job is 0."""
    assert worst_exit_code([]) == 0
    assert worst_exit_code([outcome("a", "NoIssuesFound", 0), outcome("b", "IssuesFound", 1)]) == 1
    assert worst_exit_code([outcome("a", "IssuesFound", 1), outcome("b", "Error", 2)]) == 2
    assert worst_exit_code([outcome("a", "Error", 3), outcome("b", "Error", 2)]) == 3
    assert worst_exit_code([outcome("a", "Error", 3), outcome("b", "Stopped", 143)]) == 143


def test_an_undocumented_code_counts_as_an_internal_error() -> None:
    """A code no outcome documents (a signal's -9, 247) is never the batch's exit code: it
    counts as 3."""
    for code in (-9, 247, 44):
        assert worst_exit_code([outcome("a", "Error", code), outcome("b", "Error", 2)]) == 3
        assert worst_exit_code([outcome("a", "Error", code), outcome("b", "Stopped", 130)]) == 130


def test_page_escapes_what_the_user_gave(tmp_path: Path) -> None:
    """A trial name or message holding HTML is shown as text, never as markup; the JSON and
    CSV hold every job."""
    jobs = [
        outcome("<script>x</script>", "Error", 2, "ClientError: <img src=x onerror=alert(1)>"),
        outcome("ok", "NoIssuesFound", 0),
    ]
    jobs[1].report = "ok/rule_report.html"
    write_summary(tmp_path, jobs, engine="pool")
    page = (tmp_path / "index.html").read_text()
    assert "<script>x" not in page and "<img" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert '<a href="ok/rule_report.html">ok</a>' in page
    summary = json.loads((tmp_path / "batch_summary.json").read_text())
    assert [j["name"] for j in summary["jobs"]] == ["<script>x</script>", "ok"]
    assert summary["exit_code"] == 2
    assert len((tmp_path / "batch_summary.csv").read_text().splitlines()) == 3
    assert "exit code 2" in format_table(jobs)


def test_control_characters_never_reach_the_page_or_the_table(tmp_path: Path) -> None:
    """ESC, BEL and NUL in a trial path or a message are shown as \\xNN on the page and in the
    terminal's table."""
    job = JobOutcome(
        name="evil",
        trial="/d/\x1b]0;owned\x07",
        status="Error",
        exit_code=2,
        message="ClientError: tag loss\x1b[2J\x07\x00 is bad",
    )
    write_summary(tmp_path, [job], engine="pool")
    page = (tmp_path / "index.html").read_text()
    for text in (page, format_table([job])):
        assert not any(ch in text for ch in "\x1b\x07\x00"), text
    assert "loss\\x1b[2J\\x07\\x00 is bad" in page and "/d/\\x1b]0;owned\\x07" in page


def test_a_titled_job_is_shown_by_its_title_with_its_name_beside(tmp_path: Path) -> None:
    """A job with a title (an MLflow run's name) is shown by it, linking its report, its
    name (the run's id path) as the link's title and a second line; a job without one is
    shown by its name alone."""
    from tests.support.html_check import index_rows

    titled = outcome("7/4f1c0e2b", "NoIssuesFound", 0)
    titled.title, titled.report = "resnet <lr=3e-4>", "7/4f1c0e2b/rule_report.html"
    plain = outcome("team/a", "IssuesFound", 1)
    plain.report = "team/a/rule_report.html"
    write_summary(tmp_path, [titled, plain], engine="watch")
    rows = index_rows(tmp_path / "index.html")
    assert [(r.label, r.href, r.hint, r.secondary) for r in rows] == [
        ("resnet <lr=3e-4>", "7/4f1c0e2b/rule_report.html", "7/4f1c0e2b", "7/4f1c0e2b"),
        ("team/a", "team/a/rule_report.html", None, ""),
    ]
    assert [r.status for r in rows] == ["NoIssuesFound", "IssuesFound"]
    summary = json.loads((tmp_path / "batch_summary.json").read_text())
    assert [j["title"] for j in summary["jobs"]] == ["resnet <lr=3e-4>", None]


def test_a_job_still_going_is_not_counted_as_an_error(tmp_path) -> None:
    """A watch's live run (exit code -1, none yet) is no internal error: the index's exit code
    is the ended runs' worst, and the page says how many are still going."""
    from container.batch.job import STILL_GOING

    outcomes = [outcome("a", "IssuesFound", 1), outcome("b", "InProgress", STILL_GOING)]
    assert worst_exit_code(outcomes) == 1
    assert worst_exit_code([outcome("b", "Starting", STILL_GOING)]) == 0
    write_summary(tmp_path, outcomes, engine="watch")
    page = (tmp_path / "index.html").read_text()
    assert "exit code 1 so far, 1 still going" in page
    assert "exit code 1 so far, 1 still going" in format_table(outcomes)
    assert json.loads((tmp_path / "batch_summary.json").read_text())["exit_code"] == 1
