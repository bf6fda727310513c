"""The rule report of a run: written beside the result file at the end (and at firings), what
each verdict shows, the data file it is drawn from, and ``rule-evaluator report``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import evaluator.report.writer as report_writer_module
from container.report_command import main as report_main
from evaluator.report import DATA_FILE_NAME, REPORT_FILE_NAME, ReportWriter, write_report
from evaluator.report.data import data_stamp, read_data, write_data
from evaluator.testing.tb_writer import write_scalars
from tests.report.conftest import SHORT_VANISHES_AT
from tests.report.harness import ReportRun, evaluate_with_report
from tests.report.trials import VANISHING_TENSOR
from tests.support.waits import wait_for_file

RESULT = "rule_evaluation_result.json"


def _html(run: ReportRun) -> str:
    return (run.output_dir / REPORT_FILE_NAME).read_text(encoding="utf-8")


def _data(run: ReportRun) -> dict[str, Any]:
    return json.loads((run.output_dir / DATA_FILE_NAME).read_text())


def test_report_is_written_beside_the_result_file(firing_run: ReportRun) -> None:
    """A run writes rule_report.html and its data file next to rule_evaluation_result.json."""
    assert firing_run.exit_code == 1
    assert firing_run.report == firing_run.output_dir / REPORT_FILE_NAME
    assert (firing_run.output_dir / RESULT).is_file()
    assert (firing_run.output_dir / DATA_FILE_NAME).is_file()


def test_verdict_line_names_the_report_written_once_after_it(firing_run: ReportRun) -> None:
    """The verdict line names the report; the report is written after it, once (a firing just
    before the end schedules a write the end cancels)."""
    events = [e["event"] for e in firing_run.log]
    (verdict,) = [e for e in firing_run.log if e["event"] == "evaluation_finished"]
    assert verdict["report"] == str(firing_run.output_dir / REPORT_FILE_NAME)
    assert events.count("rule_report_written") == 1
    assert events.index("rule_report_written") > events.index("evaluation_finished")


def test_firing_report_names_tensor_step_value_and_threshold(firing_run: ReportRun) -> None:
    """The verdict of a firing names the status, the tensor, the firing step and the threshold."""
    html = _html(firing_run)
    assert "IssuesFound" in html and VANISHING_TENSOR in html
    assert f"fired at step {SHORT_VANISHES_AT}." in html
    assert "threshold = 1e-07" in html and "5e-08" in html


def test_report_is_self_contained(firing_run: ReportRun) -> None:
    """One file that fetches nothing: scripts and styles inline, a policy forbidding any
    fetch, no address to load from; the charts are specs the inline script draws."""
    html = _html(firing_run)
    assert "default-src 'none'" in html and "connect-src 'none'" in html
    assert "<script src" not in html and "<link" not in html and "<img" not in html
    for attribute in ('src="http', "src='http", 'href="http', "url(http", 'src="//'):
        assert attribute not in html
    assert html.count('class="chart-spec"') >= 1 and "new uPlot(" in html


def test_firing_series_holds_the_firing_value_at_the_firing_step(firing_run: ReportRun) -> None:
    """The data file holds the tested quantity per tensor, the firing point exactly."""
    (series,) = [
        s
        for s in _data(firing_run)["rules"]["VanishingGradient"]["series"]
        if s["tensors"] == [VANISHING_TENSOR]
    ]
    assert [SHORT_VANISHES_AT, pytest.approx(5e-8)] in series["points"]
    assert series["firings"] == [[SHORT_VANISHES_AT, pytest.approx(5e-8)]]
    assert series["threshold"] == 1e-7 and series["comparison"] == "<"
    assert len(_data(firing_run)["rules"]["VanishingGradient"]["series"]) == 6


def test_firing_report_holds_the_values_that_fired(tmp_path: Path) -> None:
    """A histogram of the fired tensor's values at the firing step, read from the trial (a
    Keras ReLU layer's 256 outputs, all dead): every value counted, drawn under "The values
    that fired", the lack of spread said."""
    from tests.report.harness import HOOK_TRIALS, evaluate_with_report

    run = evaluate_with_report(
        ["--trial-dir", str(HOOK_TRIALS / "keras_dead_relu"), "--rule", "DeadRelu"],
        tmp_path / "out",
    )
    found = _data(run)["rules"]["DeadRelu"]["histogram"]
    assert (found["tensor"], found["step"]) == ("hidden_relu/outputs", 0)
    assert sum(found["counts"]) + found["nonfinite"] == found["size"] == 256
    assert len(found["edges"]) == len(found["counts"]) + 1
    html = _html(run)
    assert "The values that fired" in html and 'class="hist"' in html
    assert "no spread: every finite value is 0" in html


def test_a_tensor_of_few_values_gets_no_histogram(firing_run: ReportRun) -> None:
    """Four gradient values make no distribution: no histogram."""
    assert _data(firing_run)["rules"]["VanishingGradient"]["histogram"] is None
    assert "The values that fired" not in _html(firing_run)


def test_result_file_stays_lean(firing_run: ReportRun) -> None:
    """The series live in the data file; the result file holds only their count."""
    result = json.loads((firing_run.output_dir / RESULT).read_text())
    assert "points" not in json.dumps(result)
    assert result["evidence"]["series"] == 6 and "series_id" not in result["evidence"]


def test_quiet_report_shows_the_closest_approach(quiet_run: ReportRun) -> None:
    """NoIssuesFound: the closest approach (tensor, value, step) and its chart."""
    html = _html(quiet_run)
    assert quiet_run.exit_code == 0 and "NoIssuesFound" in html
    assert "Closest approach" in html and VANISHING_TENSOR in html
    assert "closest: 5e-08 at step 50" in html  # the chart's caption
    assert 'class="chart-spec"' in html


def test_error_report_shows_the_message_what_to_fix_and_the_trial(error_run: ReportRun) -> None:
    """Error: the ClientError text, what to fix, and the trial's collections and tensors."""
    html = _html(error_run)
    assert error_run.exit_code == 2 and "Error" in html
    assert "ClientError: Insufficient information to invoke rule AllZero" in html
    assert "What to fix" in html and "relu_out.*" in html
    assert "What the trial holds" in html and "gradients/dense_5/kernelGrad" in html
    assert "TRAIN 80" in html  # steps per mode
    summary = _data(error_run)["rules"]["AllZero"]["trial_summary"]
    assert summary["collections"] == {"gradients": 6}
    assert "(global steps 0..79)" in html  # smdebug's output: its global steps are logged


def test_error_report_shows_the_steps_the_writer_logged(tmp_path: Path) -> None:
    """Error on a TensorBoard run with phases: what the trial holds is given in the steps the
    writer logged, per mode, not the doubled global steps (docs/compatibility.md)."""
    write_scalars(
        tmp_path / "run",
        {
            "train/loss": [(s, 2.0 - s / 100) for s in range(10)],
            "val/loss": [(s, 2.1 - s / 100) for s in range(0, 10, 5)],
        },
    )
    argv = ["--trial-dir", str(tmp_path / "run"), "--rule", "AllZero", "--tensor_regex", "x.*"]
    run = evaluate_with_report(argv, tmp_path / "out")
    html = _html(run)
    assert run.exit_code == 2 and "What the trial holds" in html
    assert "12 (TRAIN steps 0..9, EVAL steps 0..5)" in html
    assert "global steps" not in html  # global steps 0..18 stay internal


def test_several_rules_get_one_page_with_a_summary_on_top(several_run: ReportRun) -> None:
    """Several rules: one page, a summary table on top linking each rule's section and
    saying why each ended as it did."""
    html = _html(several_run)
    assert html.index("<h2>Summary</h2>") < html.index('<section id="rule-')
    for rule in ("VanishingGradient", "ExplodingTensor"):
        assert f'<a href="#rule-{rule}">{rule}</a>' in html
        assert f'<section id="rule-{rule}">' in html
    assert "VanishingGradient: mean |gradients/dense_0/kernelGrad|" in html  # why it fired
    assert "none met the condition" in html  # ExplodingTensor: what it checked


@pytest.mark.parametrize("fixture", ["firing_run", "error_run", "several_run"])
def test_report_command_redraws_from_the_output_folder(
    fixture: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """rule-evaluator report OUTPUT_DIR writes the same page again and prints its path."""
    run: ReportRun = request.getfixturevalue(fixture)
    before = _html(run)
    (run.output_dir / REPORT_FILE_NAME).unlink()
    assert report_main([str(run.output_dir)]) == 0
    printed = capsys.readouterr().out.strip()
    assert Path(printed) == (run.output_dir / REPORT_FILE_NAME).absolute()
    assert _html(run) == before


def test_report_command_on_a_folder_without_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder without a result file: exit 2 and a ClientError naming what to give."""
    assert report_main([str(tmp_path)]) == 2
    assert "no rule_evaluation_result.json" in capsys.readouterr().err


def test_report_without_a_data_file_shows_the_verdict(
    firing_run: ReportRun, tmp_path: Path
) -> None:
    """A result file alone (e.g. a custom rule that recorded nothing): verdict and reason."""
    (tmp_path / RESULT).write_bytes((firing_run.output_dir / RESULT).read_bytes())
    html = write_report(tmp_path / RESULT).read_text()
    assert VANISHING_TENSOR in html and "recorded no series" in html
    assert "What to try" in html and "normalisation" in html


def test_a_firing_writes_the_report_later_on_its_own_thread(
    firing_run: ReportRun, tmp_path: Path
) -> None:
    """A firing returns at once and the report appears after firing_delay; a second firing
    within min_interval adds no write."""
    result = tmp_path / RESULT
    result.write_bytes((firing_run.output_dir / RESULT).read_bytes())
    writes: list[str] = []
    writer = ReportWriter(firing_delay=0.05, logger=_Log(writes))
    writer({"event": "rule_fired", "result_file": str(result)})
    assert wait_for_file(tmp_path / REPORT_FILE_NAME, interval=0.02)
    writer({"event": "rule_fired", "result_file": str(result)})  # within min_interval
    writer({"event": "evaluation_finished", "result_file": str(result)})
    assert writer.wait()
    assert writes == ["rule_report_written", "rule_report_written"]


def test_the_end_cancels_a_pending_firing_write(firing_run: ReportRun, tmp_path: Path) -> None:
    """A run that ends before the firing's write is due writes its report once, at the end."""
    result = tmp_path / RESULT
    result.write_bytes((firing_run.output_dir / RESULT).read_bytes())
    writes: list[str] = []
    writer = ReportWriter(firing_delay=60.0, logger=_Log(writes))
    writer({"event": "rule_fired", "result_file": str(result)})
    assert not (tmp_path / REPORT_FILE_NAME).exists()
    writer({"event": "evaluation_finished", "result_file": str(result)})
    assert writer.wait() and (tmp_path / REPORT_FILE_NAME).exists()
    assert writes == ["rule_report_written"]


def test_the_data_file_is_kept_current_only_after_news(
    firing_run: ReportRun, tmp_path: Path
) -> None:
    """While no rule judges a step the data file keeper writes nothing (and wakes for
    nothing); a judged step brings one write at most ``every`` seconds later."""
    result = tmp_path / RESULT
    result.write_bytes((firing_run.output_dir / RESULT).read_bytes())
    writer = ReportWriter()
    writer.keep_data_current(result, lambda: {}, every=0.05)
    time.sleep(0.5)  # ten turns of the old timer
    assert not (tmp_path / DATA_FILE_NAME).exists()
    writer.note_news()
    assert wait_for_file(tmp_path / DATA_FILE_NAME, interval=0.02)
    writer({"event": "evaluation_finished", "result_file": str(result)})
    assert writer.wait()


def test_the_data_file_keeper_reads_back_only_what_another_writer_replaced(
    firing_run: ReportRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keeper starts from what it last wrote; a data file another writer put in its
    place since (a firing's report, with the run's curves) is read back and kept."""
    result = tmp_path / RESULT
    result.write_bytes((firing_run.output_dir / RESULT).read_bytes())
    rule = json.loads(result.read_text())["rules"][0]
    key = rule.get("configuration_name") or rule["rule"]
    reads: list[Path] = []

    def counted(output_dir: Path) -> dict[str, Any]:
        reads.append(output_dir)
        return read_data(output_dir)

    monkeypatch.setattr(report_writer_module, "read_data", counted)
    writer = ReportWriter()
    writer.keep_data_current(result, lambda: {}, every=0.02)

    def turn() -> dict[str, Any]:
        before = data_stamp(tmp_path)
        writer.note_news()
        deadline = time.monotonic() + 10
        while data_stamp(tmp_path) == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert data_stamp(tmp_path) != before
        return json.loads((tmp_path / DATA_FILE_NAME).read_text())

    turn()
    turn()
    turn()
    assert len(reads) == 1  # the first turn only: the file was the keeper's own since
    write_data(tmp_path, {"version": 1, "rules": {key: {"run": {"curves": []}}}})
    assert turn()["rules"][key]["run"] == {"curves": []}
    assert len(reads) == 2
    writer({"event": "evaluation_finished", "result_file": str(result)})
    assert writer.wait()


class _Log:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def warning(self, event: str, **_: Any) -> None:
        self.events.append(event)

    def debug(self, event: str, **_: Any) -> None:
        self.events.append(event)

    info = debug


def test_writer_never_raises(tmp_path: Path) -> None:
    """A result file that cannot be read is logged, not raised: the verdict stands."""
    logged: list[str] = []
    writer = ReportWriter(logger=_Log(logged))
    writer({"event": "evaluation_finished", "result_file": str(tmp_path / "missing.json")})
    writer({"event": "rule_status", "result_file": str(tmp_path / "missing.json")})
    assert writer.wait()
    assert logged == ["rule_report_not_written"]


CUSTOM_RULE = """
from smdebug.rules import Rule


class GradientTooSmall(Rule):
    def __init__(self, base_trial, threshold="0.0001"):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        fired = False
        for name in self.base_trial.tensor_names(collection="gradients"):
            mean = float(abs(self.base_trial.tensor(name).value(step)).mean())
            fired |= self.evidence.compare(
                step, name, quantity="mean |gradient|", value=mean,
                parameter="threshold", threshold=self.threshold, fires_when="<",
            )
            self.evidence.record(step, name, quantity="max |gradient|",
                                 value=float(abs(self.base_trial.tensor(name).value(step)).max()))
        return fired
"""


def test_custom_rule_charts_what_it_records(fading_trial: Path, tmp_path: Path) -> None:
    """docs/report.md's custom rule: its compare() and record() series reach the report."""
    source = tmp_path / "my_rules.py"
    source.write_text(CUSTOM_RULE)
    from tests.report.harness import evaluate_with_report

    run = evaluate_with_report(
        ["--trial-dir", str(fading_trial), "--source_s3_uri", str(source),
         "--rule", "GradientTooSmall", "--threshold", "1e-7"],
        tmp_path / "out",
    )  # fmt: skip
    assert run.exit_code == 1
    series = _data(run)["rules"]["GradientTooSmall"]["series"]
    assert {s["quantity"] for s in series} >= {"mean |gradient|", "max |gradient|"}
    assert "fired at step 50" in _html(run) and VANISHING_TENSOR in _html(run)


READS_ONLY_RULE = """
from smdebug.rules import Rule


class SmallGradient(Rule):
    def invoke_at_step(self, step):
        names = self.base_trial.tensor_names(collection="gradients")
        return any(abs(self.base_trial.tensor(n).value(step)).mean() < 1e-7 for n in names)
"""


def test_custom_rule_that_records_nothing_gets_the_series_it_read(
    fading_trial: Path, tmp_path: Path
) -> None:
    """A rule written for smdebug (no evidence calls) gets a chart of every tensor it read,
    over the steps, with its firing step marked."""
    source = tmp_path / "reads.py"
    source.write_text(READS_ONLY_RULE)
    from tests.report.harness import evaluate_with_report

    run = evaluate_with_report(
        ["--trial-dir", str(fading_trial), "--source_s3_uri", str(source),
         "--rule", "SmallGradient"],
        tmp_path / "out",
    )  # fmt: skip
    assert run.exit_code == 1
    series = _data(run)["rules"]["SmallGradient"]["series"]
    read = {tuple(s["tensors"]) for s in series if s["quantity"] == "mean |value|"}
    assert (VANISHING_TENSOR,) in read and len(read) == 6
    (vanishing,) = [s for s in series if s["tensors"] == [VANISHING_TENSOR]]
    assert vanishing["mode"] == "TRAIN" and vanishing["count"] == 51  # steps 0..50
    assert [50, pytest.approx(5e-8)] in vanishing["points"]
    html = _html(run)
    assert "The curves behind the verdict" in html and "recorded no series" not in html
    assert "What to try" in html
