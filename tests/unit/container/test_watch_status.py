"""A run's line in watch_status.json and the index (container/watch/status.py): made from its
result file and the steps its log named; a run that wrote no result is its process's outcome;
both files written whole."""

from __future__ import annotations

import json
from pathlib import Path

from container.watch.status import RunEntry, write_status

FIRING = {
    "status": "IssuesFound",
    "exit_code": 1,
    "message": "RuleEvaluationConditionMet: ...",
    "rules": [
        {
            "rule": "LossNotDecreasing",
            "configuration_name": "LossNotDecreasing",
            "status": "IssuesFound",
            "step": 40,
            "fired_steps": [40, 60],
            "evidence": {"reasons": [{"diagnosis": "plateau"}]},
        },
        {"rule": "ExplodingTensor", "configuration_name": "ExplodingTensor",
         "status": "InProgress", "step": 12, "fired_steps": []},
    ],
}  # fmt: skip


def test_an_entry_holds_statuses_steps_firing_and_diagnosis(tmp_path: Path) -> None:
    """Per rule the status, the later of the recorded and the logged step, the first firing
    and its diagnosis; for the run the first firing and the last step of any rule."""
    entry = RunEntry("team/a", "runs/team/a")
    changed = entry.update(FIRING, last_steps={"ExplodingTensor": 70}, ended=False, output=tmp_path)
    fields = entry.to_dict()
    assert changed and fields["status"] == "IssuesFound" and not fields["ended"]
    assert (fields["fired_step"], fields["last_step"], fields["diagnosis"]) == (40, 70, "plateau")
    assert [(r["rule"], r["last_step"], r["fired_step"]) for r in fields["rules"]] == [
        ("LossNotDecreasing", 40, 40),
        ("ExplodingTensor", 70, None),
    ]
    assert fields["updated_at"].endswith("Z")
    assert not entry.update(
        FIRING, last_steps={"ExplodingTensor": 70}, ended=False, output=tmp_path
    )


def test_a_run_that_wrote_no_result_is_its_process_outcome(tmp_path: Path) -> None:
    """No result file: Error with the process's exit code and last error line, or Stopped
    after a stop signal."""
    entry = RunEntry("a", "runs/a")
    entry.update(None, last_steps={}, ended=True, exit_code=2, message="ClientError: x",
                 output=tmp_path)  # fmt: skip
    assert (entry.fields["status"], entry.fields["exit_code"]) == ("Error", 2)
    assert entry.fields["message"] == "ClientError: x"
    stopped = RunEntry("b", "runs/b")
    stopped.update(None, last_steps={}, ended=True, exit_code=143, output=tmp_path)
    assert stopped.fields["status"] == "Stopped"


def test_the_status_file_and_the_index_list_every_run(tmp_path: Path) -> None:
    """watch_status.json lists every run in name order; index.html links each report."""
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "rule_report.html").write_text("<html></html>")
    first, second = RunEntry("b", "runs/b"), RunEntry("a", "runs/a")
    first.update(FIRING, last_steps={}, ended=True, output=tmp_path / "b")
    write_status(tmp_path, [first, second], shard=(1, 2))
    document = json.loads((tmp_path / "watch_status.json").read_text())
    assert [r["run"] for r in document["runs"]] == ["a", "b"] and document["shard"] == "1/2"
    assert document["runs"][0]["status"] == "Starting"
    page = (tmp_path / "index.html").read_text()
    assert 'href="b/rule_report.html"' in page and "Starting" in page
    assert list((tmp_path / ".watch" / "tmp").iterdir()) == []


def test_an_mlflow_run_is_listed_with_its_run_name(tmp_path: Path) -> None:
    """A run with a title (an MLflow run's name) shows it as run_name beside its run path;
    a folder's run has none."""
    entry = RunEntry("3/4f1c", "runs:/4f1c", title="resnet-lr3")
    entry.update(FIRING, last_steps={}, ended=False, output=tmp_path)
    assert {k: entry.to_dict()[k] for k in ("run", "run_name", "trial")} == {
        "run": "3/4f1c", "run_name": "resnet-lr3", "trial": "runs:/4f1c"
    }  # fmt: skip
    assert RunEntry("a", "runs/a").to_dict()["run_name"] is None


def test_a_held_run_is_listed_with_its_status_and_message_and_no_exit_code() -> None:
    """A held run (a sweep's parent): its status and message, no exit code, no rules, not
    ended; the index row says the same; holding it again with the same reason changes
    nothing."""
    from container.discovery import Held

    entry = RunEntry("7/p", "runs:/p", title="sweep")
    held = Held("ParentRun", "its 2 child run(s) are evaluated")
    assert entry.hold(held) and entry.held
    fields = entry.to_dict()
    assert (fields["status"], fields["message"], fields["exit_code"]) == (
        "ParentRun", "its 2 child run(s) are evaluated", None
    )  # fmt: skip
    assert fields["rules"] == [] and fields["fired_step"] is None and not fields["ended"]
    assert entry.outcome.status == "ParentRun" and entry.outcome.message == held.message
    assert not entry.hold(held)


def test_the_index_shows_an_mlflow_runs_name_over_its_id(tmp_path: Path) -> None:
    """An entry with a title (an MLflow run's name) is shown by that name in index.html,
    its id path beside, still linking its report; a held one without a report by name too."""
    from container.discovery import Held
    from tests.support.html_check import index_rows

    ran = RunEntry("7/a1", "runs:/a1", title="resnet-3")
    (tmp_path / "7" / "a1").mkdir(parents=True)
    (tmp_path / "7" / "a1" / "rule_report.html").write_text("<html></html>")
    ran.update(FIRING, last_steps={}, ended=True, output=tmp_path / "7" / "a1")
    parent = RunEntry("7/p", "runs:/p", title="sweep")
    parent.hold(Held("ParentRun", "its child runs are evaluated"))
    write_status(tmp_path, [ran, parent], shard=(0, 1))
    rows = index_rows(tmp_path / "index.html")
    assert [(r.label, r.href, r.secondary, r.status) for r in rows] == [
        ("resnet-3", "7/a1/rule_report.html", "7/a1", "IssuesFound"),
        ("sweep", None, "7/p", "ParentRun"),
    ]
