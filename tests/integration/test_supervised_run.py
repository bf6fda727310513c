"""The supervised command (``container.supervisor``): a stop never reads as a verdict, rule code
cannot decide the exit code, and what rules print never reaches the status stream.

Each case runs the real command in a subprocess as a user would, and reproduces a failure the
unsupervised command had (issue #12): exit 1 for an early SIGTERM, ``InProgress`` left after a
rule's ``os._exit``, a process kept alive by a rule's thread, a forged ``rule_status`` line.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.evaluator_cli import (
    ROOT,
    EvaluatorCli,
    child_of,
    copy_trial,
    wait_until_sigterm_is_handled,
)
from tests.support.waits import wait_for_file

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")

RULES = textwrap.dedent("""
    import os
    import sys
    import threading
    import time

    from smdebug.rules import Rule


    class Stop(BaseException):
        pass


    class RaisesInConstructor(Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial)
            raise Stop("no")

        def invoke_at_step(self, step):
            return False


    class Interrupts(Rule):
        def invoke_at_step(self, step):
            raise KeyboardInterrupt()


    class ClosesGenerator(Rule):
        def invoke_at_step(self, step):
            raise GeneratorExit()


    class Exits(Rule):
        def invoke_at_step(self, step):
            sys.exit(0)


    class LeavesThread(Rule):
        def invoke_at_step(self, step):
            if not hasattr(self, "thread"):
                self.thread = threading.Thread(target=time.sleep, args=(3600,))
                self.thread.start()
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            return False


    class HardExit(Rule):
        def invoke_at_step(self, step):
            os._exit(0)


    class Prints(Rule):
        def invoke_at_step(self, step):
            sys.stdout.write("no newline here")
            print('{"event": "rule_status", "status": "NoIssuesFound", "rule": "Prints"}')
            sys.stderr.write("to stderr\\n")
            os.write(1, b"raw fd write\\n")
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            return False


    class Sleeps(Rule):
        def invoke_at_step(self, step):
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            time.sleep(3600)
            return False


    class Backtracks(Rule):
        def invoke_at_step(self, step):
            import re

            # Holds the interpreter lock for hours: only a kill from outside ends it.
            return re.match(r"^(a+)+$", "a" * 64 + "b") is not None


    class WhoAmI(Rule):
        def __init__(self, base_trial, out):
            super().__init__(base_trial)
            self.out = out

        def invoke_at_step(self, step):
            with open(self.out, "w") as f:
                f.write(f"{os.getuid()}:{os.getgid()}")
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            return False
""")


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.py"
    path.write_text(RULES)
    return path


def _custom(cli: EvaluatorCli, rules_file: Path, rule: str, *extra: str, **kw: Any) -> Any:
    return cli(
        "--trial-dir", EXAMPLE, "--rule", rule, "--source_s3_uri", str(rules_file), *extra, **kw
    )


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3, 0.6])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_from_the_first_moment_is_stopped(
    tmp_path: Path, delay: float, signum: signal.Signals
) -> None:
    """SIGTERM/SIGINT at any moment of start-up, from the supervisor's first line on
    (imports, the child's start, configuration, trial), ends with 128 + signal and Stopped in
    the message file, never exit 1."""
    cli = EvaluatorCli(tmp_path)
    live = _live_trial(tmp_path)  # training still running: the run lasts until stopped
    process = cli.command(
        "--trial-dir", str(live), "--rule", "ExplodingTensor", "--wait_for_training_end", "true"
    ).start()
    wait_until_sigterm_is_handled(process.pid)
    time.sleep(delay)
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signum, (out, err)
    assert (cli.opt_ml / "output" / "message").read_text() == "Stopped"
    result = cli.output_dir / "rule_evaluation_result.json"
    if result.exists():  # when the configuration was read before the stop
        document = json.loads(result.read_text())
        assert document["status"] == "Stopped" and document["exit_code"] == 128 + signum


@pytest.mark.skipif(sys.platform != "linux", reason="counts the supervisor's wakeups in /proc")
def test_a_run_waiting_for_data_leaves_its_supervisor_asleep(tmp_path: Path) -> None:
    """While a run waits for data (training still running, nothing new), its supervisor
    sleeps on its pipes and signals: in 3 s it wakes at most twice (it looked every 0.2 s: 15
    times), and a SIGTERM still wakes it at once (Stopped)."""
    cli = EvaluatorCli(tmp_path)
    live = _live_trial(tmp_path)
    process = cli.command(
        "--trial-dir", str(live), "--rule", "ExplodingTensor", "--wait_for_training_end", "true"
    ).start()
    try:
        deadline = time.monotonic() + 30
        while not (cli.output_dir / "rule_evaluation_result.json").exists():
            assert time.monotonic() < deadline and process.poll() is None, "no result file"
            time.sleep(0.1)
        time.sleep(2.0)  # the rule has read every step there is
        before = _wakeups(process.pid)
        time.sleep(3.0)
        assert _wakeups(process.pid) - before <= 2
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert process.returncode == 128 + signal.SIGTERM
    assert (cli.opt_ml / "output" / "message").read_text() == "Stopped"


def _wakeups(pid: int) -> int:
    """How often process ``pid`` went to sleep and woke again (voluntary context switches)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


@pytest.mark.parametrize(
    ("rule", "raised"),
    [
        ("RaisesInConstructor", "Stop"),
        ("Interrupts", "KeyboardInterrupt"),
        ("ClosesGenerator", "GeneratorExit"),
        ("Exits", "SystemExit"),
    ],
)
def test_whatever_a_rule_raises_is_its_client_error(
    tmp_path: Path, rules_file: Path, rule: str, raised: str
) -> None:
    """BaseException subclasses, KeyboardInterrupt, GeneratorExit and SystemExit from rule code
    end that rule in Error, exit 2, naming the rule, the exception and the file's line."""
    run = _custom(EvaluatorCli(tmp_path), rules_file, rule)
    assert run.returncode == 2, run.describe()
    result = run.result
    assert result is not None and result["status"] == "Error", run.describe()
    assert result["rules"][0]["status"] == "Error"
    details = result["rules"][0]["details"]
    assert details.startswith("ClientError: ") and rule in details and raised in details
    assert "rules.py, line" in details


def test_a_thread_left_running_does_not_hold_the_run(tmp_path: Path, rules_file: Path) -> None:
    """A rule that starts a non-daemon thread sleeping an hour: the verdict still ends the
    command (the run takes seconds, not the thread's hour)."""
    run = _custom(EvaluatorCli(tmp_path), rules_file, "LeavesThread", timeout=30)
    assert run.returncode == 0, run.describe()
    assert run.result is not None and run.result["status"] == "NoIssuesFound"


def test_os_exit_in_a_rule_is_an_internal_error_not_in_progress(
    tmp_path: Path, rules_file: Path
) -> None:
    """os._exit(0) in rule code: no verdict was reported, so exit 3 and the result file,
    message and report say so (it used to stay InProgress, exit 0)."""
    run = _custom(EvaluatorCli(tmp_path), rules_file, "HardExit")
    assert run.returncode == 3, run.describe()
    assert run.message is not None and run.message.startswith("InternalServerError: ")
    assert "exited with code 0 before it reported a verdict" in run.message
    result = run.result
    assert result is not None and result["status"] == "Error" and result["exit_code"] == 3
    assert result["rules"][0]["status"] == "Error"
    report = (run.output_dir / "rule_report.html").read_text(encoding="utf-8")
    assert "exited with code 0 before it reported a verdict" in report


def test_rule_output_becomes_log_lines(tmp_path: Path, rules_file: Path) -> None:
    """What a rule prints (no newline, a forged rule_status line, stderr, a raw write to file
    descriptor 1) arrives as rule_output log lines; every stdout line is JSON and the only
    rule_status lines are the evaluator's."""
    run = _custom(EvaluatorCli(tmp_path), rules_file, "Prints")
    assert run.returncode == 0, run.describe()
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    outputs = [line for line in lines if line["event"] == "rule_output"]
    texts = {(line["stream"], line["text"]) for line in outputs}
    assert ("stdout", "raw fd write") in texts
    assert ("stderr", "to stderr") in texts
    assert any(text.startswith("no newline here{") for stream, text in texts)
    statuses = [line for line in lines if line["event"] == "rule_status"]
    assert [s["status"] for s in statuses] == ["InProgress", "NoIssuesFound"]
    assert all(s["logger"] == "evaluator.status" for s in statuses)


def test_a_killed_evaluation_is_an_internal_error(tmp_path: Path, rules_file: Path) -> None:
    """The evaluation process killed by SIGKILL (what the OOM killer does): exit 3 with
    InternalServerError naming the signal, and the result file is Error, not InProgress."""
    cli = EvaluatorCli(tmp_path)
    process = cli.command(  # the rule sleeps at its first step
        "--trial-dir", EXAMPLE, "--rule", "Sleeps", "--source_s3_uri", str(rules_file)
    ).start()
    result = cli.output_dir / "rule_evaluation_result.json"
    wait_for_file(result)
    child = child_of(process.pid)
    os.kill(child, signal.SIGKILL)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 3, (out, err)
    message = (cli.opt_ml / "output" / "message").read_text()
    assert message.startswith("InternalServerError: ") and "SIGKILL" in message
    document = json.loads(result.read_text())
    assert document["status"] == "Error" and document["rules"][0]["status"] == "Error"


def _readable_by_all(path: Path) -> bool:
    """Whether every folder from / to ``path`` lets other users in (o+x)."""
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents] if p.is_dir())


@pytest.mark.parametrize("rule", ["Sleeps", "Backtracks"])
def test_a_step_over_rule_step_timeout_ends_the_run(
    tmp_path: Path, rules_file: Path, rule: str
) -> None:
    """A rule step that sleeps, or backtracks in a regex holding the interpreter lock, past
    rule_step_timeout: exit 2 and a ClientError naming the rule, the step and the limit, in
    the result file, the message and the report the supervisor draws."""
    run = _custom(EvaluatorCli(tmp_path), rules_file, rule, "--rule_step_timeout", "2", timeout=60)
    assert run.returncode == 2, run.describe()
    result = run.result
    assert result is not None and result["status"] == "Error"
    details = result["rules"][0]["details"]
    assert f"Rule {rule} spent more than 2 s on step 0" in details
    assert "rule_step_timeout" in details
    assert result["rules"][0]["error_type"] == "RuleStepTimeout"
    assert run.message is not None and run.message.startswith("ClientError: Rule ")
    report = (run.output_dir / "rule_report.html").read_text(encoding="utf-8")
    assert f"Rule {rule} spent more than 2 s on step 0" in report


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: checks the switch to another user")
def test_started_as_root_the_rule_runs_unprivileged(rules_file: Path) -> None:
    """Started as root with EVALUATOR_RUN_AS and root-owned 0755 output folders (SageMaker's
    case): the result and message files are written, and the rule code ran as that uid."""
    interpreter = Path(sys.base_prefix)
    if not (_readable_by_all(interpreter) and _readable_by_all(ROOT)):
        pytest.skip(
            f"the interpreter ({interpreter}) or the checkout ({ROOT}) is not readable by other "
            "users here; the container tests check this switch in the image"
        )
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="run-as-"))  # pytest's own tmp folder is 0700
    try:
        root.chmod(0o755)
        cli = EvaluatorCli(root)
        for folder in (cli.opt_ml, cli.opt_ml / "output", cli.opt_ml / "processing"):
            folder.chmod(0o755)
        spy = root / "spy"
        spy.mkdir()
        spy.chmod(0o777)
        rules = root / "rules.py"
        rules.write_text(rules_file.read_text())
        rules.chmod(0o644)
        run = _custom(
            cli, rules, "WhoAmI", "--out", str(spy / "uid"), env={"EVALUATOR_RUN_AS": "65534:65534"}
        )
        assert run.returncode == 0, run.describe()
        assert (spy / "uid").read_text() == "65534:65534"
        assert run.result is not None and run.result["status"] == "NoIssuesFound"
        assert cli.output_dir.stat().st_uid == 65534
        assert any(line.get("event") == "running_as" for line in run.log_lines)
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def _live_trial(tmp_path: Path) -> Path:
    """The example trial without its end marker: as if training were still running."""
    trial = copy_trial(Path(EXAMPLE), tmp_path / "live")
    (trial / "training_job_end.ts").unlink()
    return trial
