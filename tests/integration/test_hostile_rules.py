"""Rule code that attacks the supervisor (issue #25): it forges the control pipe's messages,
ignores a stop, leaves processes behind, signals the supervisor. Each case runs the real
command with the attack as a custom rule, and checks the outcome the docs promise
(docs/reliability.md, "Threat model")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.evaluator_cli import ROOT, EvaluatorCli, child_of
from tests.support.waits import wait_for_file, wait_until

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")

RULES = textwrap.dedent("""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from smdebug.rules import Rule


    def forge(message):
        # Every pipe this process holds: the supervisor's control pipe is one of them.
        line = (json.dumps(message) + "\\n").encode()
        for name in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                    os.write(int(name), line)
            except OSError:
                pass


    class ForgesVerdict(Rule):
        def __init__(self, base_trial, code="1"):
            super().__init__(base_trial)
            self.code = int(code)

        def invoke_at_step(self, step):
            forge({"m": "verdict", "exit_code": self.code})
            os._exit(self.code)


    class ForgesOutputs(Rule):
        def __init__(self, base_trial, victim):
            super().__init__(base_trial)
            self.victim = victim

        def invoke_at_step(self, step):
            forge({"m": "outputs", "result_dir": self.victim, "message_dir": self.victim,
                   "step_timeout": None})
            os._exit(0)


    class ForgesIdle(Rule):
        def invoke_at_step(self, step):
            forge({"m": "outputs", "step_timeout": None})
            forge({"m": "idle", "rule": "ForgesIdle", "step": step})
            forge({"m": "wait", "rules": ["ForgesIdle"]})
            time.sleep(3600)


    class IgnoresStop(Rule):
        def __init__(self, base_trial, flag):
            super().__init__(base_trial)
            self.flag = flag
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        def invoke_at_step(self, step):
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            if step == 0:
                open(self.flag, "w").close()
                time.sleep(3)
            return True


    ESCAPE = '''
    import os, sys, time
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    with open(sys.argv[1], "w") as f:
        f.write(os.readlink("/proc/self"))  # the pid outside any PID namespace
    time.sleep(4)
    with open(sys.argv[2], "w") as f:
        f.write('{"status": "NoIssuesFound", "exit_code": 0, "rules": []}')
    '''


    class Escapes(Rule):
        def __init__(self, base_trial, pidfile, result):
            super().__init__(base_trial)
            self.pidfile = pidfile
            self.result = result

        def invoke_at_step(self, step):
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            if step == 0:
                subprocess.run([sys.executable, "-c", ESCAPE, self.pidfile, self.result])
                while not os.path.exists(self.pidfile):
                    time.sleep(0.05)
            return True


    class Sleeps(Rule):
        def invoke_at_step(self, step):
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            time.sleep(3600)


    class SignalsSupervisor(Rule):
        def __init__(self, base_trial, how):
            super().__init__(base_trial)
            self.how = how

        def invoke_at_step(self, step):
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            parent = ancestors()[0]  # (os.getppid() reads 0 in a PID namespace)
            for signum in (signal.SIGTERM, signal.SIGINT):
                try:
                    if self.how == "kill":
                        os.kill(parent, signum)
                    elif self.how == "group":
                        os.kill(-os.getpgid(parent), signum)
                    else:  # a process of its own that sends it and ends at once
                        subprocess.run(["kill", f"-{int(signum)}", str(parent)],
                                       stderr=subprocess.DEVNULL)
                except OSError:
                    pass
            if self.how == "kill":
                try:
                    os.kill(parent, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.1)  # the signals arrive at every one of the 16 steps, long before the end
            return False


    def ancestors():
        # The supervisor, its parent, its grandparent: as /proc shows them (outside any
        # PID namespace the run may be in).
        found, pid = [], int(os.readlink("/proc/self"))  # (os.getpid() is 1 in a namespace)
        while len(found) < 3:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
            if pid <= 1:
                break
            found.append(pid)
        return found


    class SignalsAncestors(Rule):
        # os.kill() of the supervisor's parent and grandparent (and their groups).
        def __init__(self, base_trial, signame):
            super().__init__(base_trial)
            self.signum = getattr(signal, signame)

        def invoke_at_step(self, step):
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            if step == 0:
                for pid in ancestors()[1:]:
                    with open(f"/proc/{pid}/stat") as f:
                        group = int(f.read().rsplit(")", 1)[1].split()[2])
                    for target in (pid, -group):
                        try:
                            os.kill(target, self.signum)
                        except OSError:
                            pass
                time.sleep(0.5)
            return False


    class ArmsSigio(Rule):
        # The kernel signals a pipe's owner when data arrives: F_SETOWN (or F_SETOWN_EX) names
        # the supervisor, its parent or its grandparent, F_SETSIG the signal.
        def __init__(self, base_trial, signame, owner):
            super().__init__(base_trial)
            self.signum = getattr(signal, signame)
            self.owner = owner

        def invoke_at_step(self, step):
            import fcntl
            import struct

            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            if step != 0:
                return False
            for victim in ancestors():
                r, w = os.pipe()
                try:
                    if self.owner == "ex":
                        fcntl.fcntl(r, 15, struct.pack("ii", 1, victim))  # F_SETOWN_EX, PID
                    else:
                        fcntl.fcntl(r, fcntl.F_SETOWN, victim)
                    fcntl.fcntl(r, 10, self.signum)  # F_SETSIG
                    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
                    os.write(w, b"x")
                except OSError as e:
                    print(f"refused: {e}")
            time.sleep(0.5)
            return False


    FORGED = [
        {"event": "rule_status", "rule": "ForgesLog", "status": "NoIssuesFound", "exit_code": 0,
         "level": "info", "logger": "evaluator.status"},
        {"event": "evaluation_finished", "status": "NoIssuesFound", "exit_code": 0,
         "rules": {"ForgesLog": "NoIssuesFound"}, "level": "info", "logger": "evaluator.verdict"},
    ]


    class ForgesLog(Rule):
        # Writes verdict lines saying NoIssuesFound on every descriptor it holds, and through
        # the evaluator's own loggers; then fires.
        def invoke_at_step(self, step):
            import structlog

            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            if step == 0:
                lines = "".join(json.dumps(m) + "\\n" for m in FORGED).encode()
                for name in os.listdir("/proc/self/fd"):
                    try:
                        os.write(int(name), lines)
                    except OSError:
                        pass
                for message in FORGED:
                    fields = {k: v for k, v in message.items() if k not in ("level", "logger")}
                    structlog.get_logger(message["logger"]).info(fields.pop("event"), **fields)
            return True


    HOP = '''
    import os, sys, time
    result, beat = sys.argv[1], sys.argv[2]
    start = last = time.monotonic()
    rewritten = False
    while time.monotonic() - start < 8:
        if os.fork():
            os._exit(0)
        os.setsid()  # a group and session of its own at every hop
        time.sleep(0.0002)
        now = time.monotonic()
        if now - last > 0.05:
            last = now
            with open(beat, "w") as f:
                f.write(str(os.getpid()))
        if now - start > 2 and not rewritten:
            rewritten = True
            with open(result + ".tmp", "w") as f:
                f.write('{"status": "NoIssuesFound", "exit_code": 0, "rules": []}')
            os.rename(result + ".tmp", result)
    '''


    class Hops(Rule):
        # A grandchild that forks and lets its parent exit every 0.2 ms (in a new session each
        # time), and rewrites the result file two seconds later.
        def __init__(self, base_trial, result, beat):
            super().__init__(base_trial)
            self.result = result
            self.beat = beat

        def invoke_at_step(self, step):
            self.base_trial.tensor(self.base_trial.tensor_names()[0]).value(step)
            if step == 0:
                for _ in range(3):
                    subprocess.Popen([sys.executable, "-c", HOP, self.result, self.beat])
                while not os.path.exists(self.beat):
                    time.sleep(0.01)
            return True
""")


# Where the evaluation may have a PID namespace of its own (root here), and where it may not
_MODES = {
    "pid-namespace": {},
    "no-namespace": {"EVALUATOR_PID_NAMESPACE": "off"},
}


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.py"
    path.write_text(RULES)
    return path


def _custom(cli: EvaluatorCli, rules_file: Path, rule: str, *extra: str, **kw: Any) -> Any:
    return cli(
        "--trial-dir", EXAMPLE, "--rule", rule, "--source_s3_uri", str(rules_file), *extra, **kw
    )


@pytest.mark.parametrize("code", ["0", "1", "44"])
def test_a_forged_verdict_is_not_the_exit_code(tmp_path: Path, rules_file: Path, code: str) -> None:
    """Rule code writes a verdict (exit 0, 1 or 44) on the supervisor's control pipe and exits
    with it: the run ends without a verdict of its own, so exit 3 and Error in the result file,
    and the supervisor's own report says why."""
    run = _custom(EvaluatorCli(tmp_path), rules_file, "ForgesVerdict", "--code", code)
    assert run.returncode == 3, run.describe()
    result = run.result
    assert result is not None and result["status"] == "Error" and result["exit_code"] == 3
    assert run.message is not None and run.message.startswith("InternalServerError: ")
    assert "the evaluation ended, but the result file cannot be taken" in run.message
    report = (run.output_dir / "rule_report.html").read_text(encoding="utf-8")
    assert "InternalServerError: the evaluation ended, but the result file" in report


def test_forged_outputs_write_nothing_where_the_rule_says(tmp_path: Path, rules_file: Path) -> None:
    """Rule code names another folder for the message and result files: the supervisor writes
    only where the configuration said, and the other folder stays empty."""
    victim = tmp_path / "victim"
    victim.mkdir()
    cli = EvaluatorCli(tmp_path)
    run = _custom(cli, rules_file, "ForgesOutputs", "--victim", str(victim))
    assert run.returncode == 3, run.describe()
    assert list(victim.iterdir()) == []
    assert run.message is not None and run.message.startswith("InternalServerError: ")
    assert run.result is not None and run.result["exit_code"] == 3


def test_forged_idle_messages_do_not_switch_off_the_step_limit(
    tmp_path: Path, rules_file: Path
) -> None:
    """Rule code says it is idle (and that no limit is set) and then sleeps: the step limit
    still ends the run, exit 2 RuleStepTimeout."""
    run = _custom(
        EvaluatorCli(tmp_path), rules_file, "ForgesIdle", "--rule_step_timeout", "2", timeout=60
    )
    assert run.returncode == 2, run.describe()
    result = run.result
    assert result is not None and result["rules"][0]["error_type"] == "RuleStepTimeout"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_is_stopped_when_rule_code_ignores_it(
    tmp_path: Path, rules_file: Path, signum: signal.Signals
) -> None:
    """Rule code ignores SIGTERM/SIGINT and goes on to fire: once the supervisor received the
    stop the run is Stopped (128 + signal), not IssuesFound."""
    cli = EvaluatorCli(tmp_path)
    flag = tmp_path / "in-step"
    process = cli.command(
        "--trial-dir",
        EXAMPLE,
        "--rule",
        "IgnoresStop",
        "--source_s3_uri",
        str(rules_file),
        "--flag",
        str(flag),
    ).start()
    wait_until(lambda: flag.exists() or process.poll() is not None, timeout=30)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, (out, err)
    document = json.loads((cli.output_dir / "rule_evaluation_result.json").read_text())
    assert document["status"] == "Stopped" and document["exit_code"] == 128 + signum
    assert (cli.opt_ml / "output" / "message").read_text() == "Stopped"


@pytest.mark.parametrize("mode", list(_MODES))
def test_a_double_forked_setsid_process_dies_with_the_run(
    tmp_path: Path, rules_file: Path, mode: str
) -> None:
    """Rule code starts a process that double-forks and calls setsid, meaning to rewrite the
    result file later: it is killed before the run ends, and the result file stands."""
    cli = EvaluatorCli(tmp_path)
    pidfile = tmp_path / "escapee.pid"
    result = cli.output_dir / "rule_evaluation_result.json"
    run = _custom(
        cli,
        rules_file,
        "Escapes",
        "--pidfile",
        str(pidfile),
        "--result",
        str(result),
        env=_MODES[mode],
    )
    assert run.returncode == 1, run.describe()
    pid = int(pidfile.read_text())
    assert not _alive(pid), f"process {pid} outlived the run"
    assert run.result is not None and run.result["status"] == "IssuesFound"


def test_the_evaluation_dies_with_a_killed_supervisor(tmp_path: Path, rules_file: Path) -> None:
    """SIGKILL of the supervisor (no chance to clean up): the evaluation process dies too
    (parent-death signal) instead of running on and writing its own verdict."""
    cli = EvaluatorCli(tmp_path)
    process = cli.command(
        "--trial-dir", EXAMPLE, "--rule", "Sleeps", "--source_s3_uri", str(rules_file)
    ).start()
    result = cli.output_dir / "rule_evaluation_result.json"
    wait_for_file(result)
    child = child_of(process.pid)
    process.kill()
    process.communicate(timeout=30)
    wait_until(lambda: not _alive(child), timeout=10)
    assert not _alive(child), "the evaluation outlived its supervisor"


@pytest.mark.parametrize("mode", list(_MODES))
@pytest.mark.parametrize("how", ["kill", "group", "subprocess"])
def test_rule_code_cannot_stop_the_supervisor(
    tmp_path: Path, rules_file: Path, how: str, mode: str
) -> None:
    """Run without a privilege drop (same user), rule code sends SIGTERM and SIGINT to the
    supervisor (directly, to its group, through a `kill` process), and SIGKILL directly: the
    run is neither stopped nor killed."""
    run = _custom(
        EvaluatorCli(tmp_path), rules_file, "SignalsSupervisor", "--how", how, env=_MODES[mode]
    )
    assert run.returncode == 0, run.describe()
    assert run.result is not None and run.result["status"] == "NoIssuesFound"


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wrapped(cli: EvaluatorCli, rules_file: Path, *args: str, env: dict[str, str]) -> Any:
    """Run the command as ``sh -c 'timeout 60 rule-evaluator ...'``: the supervisor's parent is
    ``timeout``, its grandparent the shell, which prints ``wrapper-exit=CODE`` and exits with
    it. A stopped or killed ancestor shows as a hang (killed after 60 s) or a signal."""
    command = cli.command(
        "--trial-dir", EXAMPLE, "--source_s3_uri", str(rules_file), *args, env=env
    )
    script = 'timeout 60 "$@"; code=$?; echo "wrapper-exit=$code"; exit $code'
    process = subprocess.Popen(
        ["sh", "-c", script, "sh", sys.executable, "-m", "container.cli", *command.args],
        cwd=ROOT,
        env=dict(command.env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        os.killpg(process.pid, signal.SIGCONT)
        out, err = process.communicate()
        return -1, out + "\n(hung: killed after 90 s)", err
    return process.returncode, out, err


@pytest.mark.parametrize("mode", list(_MODES))
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGSTOP"])
def test_rule_code_cannot_signal_the_supervisors_ancestors(
    tmp_path: Path, rules_file: Path, signame: str, mode: str
) -> None:
    """Rule code os.kill()s the supervisor's parent (``timeout``) and grandparent (a shell),
    and their process groups, with SIGTERM, SIGINT or SIGSTOP: the run and its wrapper end
    as if nothing had been sent (exit 0, NoIssuesFound)."""
    cli = EvaluatorCli(tmp_path)
    code, out, err = _wrapped(
        cli, rules_file, "--rule", "SignalsAncestors", "--signame", signame, env=_MODES[mode]
    )
    assert code == 0 and "wrapper-exit=0" in out, (code, out, err)
    document = json.loads((cli.output_dir / "rule_evaluation_result.json").read_text())
    assert document["status"] == "NoIssuesFound"


@pytest.mark.parametrize("mode", list(_MODES))
@pytest.mark.parametrize(
    ("signame", "owner"),
    [
        ("SIGTERM", "pid"),
        ("SIGINT", "pid"),
        ("SIGKILL", "pid"),
        ("SIGSTOP", "pid"),
        ("SIGTERM", "ex"),
    ],
)
def test_rule_code_cannot_arm_a_descriptor_to_signal_the_supervisor(
    tmp_path: Path, rules_file: Path, signame: str, owner: str, mode: str
) -> None:
    """Rule code makes the supervisor, its parent and its grandparent the owner of a pipe
    (``F_SETOWN``, ``F_SETOWN_EX``), picks the signal (``F_SETSIG``) and writes to the pipe,
    so that the kernel would send it: refused, and the run ends as if nothing was tried."""
    cli = EvaluatorCli(tmp_path)
    code, out, err = _wrapped(
        cli,
        rules_file,
        "--rule",
        "ArmsSigio",
        "--signame",
        signame,
        "--owner",
        owner,
        env=_MODES[mode],
    )
    assert code == 0 and "wrapper-exit=0" in out, (code, out, err)
    document = json.loads((cli.output_dir / "rule_evaluation_result.json").read_text())
    assert document["status"] == "NoIssuesFound"


@pytest.mark.parametrize("mode", list(_MODES))
def test_a_pid_hopping_grandchild_dies_with_the_run(
    tmp_path: Path, rules_file: Path, mode: str
) -> None:
    """Rule code starts a process that forks and lets its parent exit every 0.2 ms, and that
    rewrites the result file to NoIssuesFound two seconds later: none of it outlives the run
    (its heartbeat file stops), and the result file keeps the run's IssuesFound."""
    cli = EvaluatorCli(tmp_path)
    beat = tmp_path / "hopper.beat"
    result = cli.output_dir / "rule_evaluation_result.json"
    run = _custom(
        cli, rules_file, "Hops", "--result", str(result), "--beat", str(beat), env=_MODES[mode]
    )
    assert run.returncode == 1, run.describe()
    stamp = beat.stat().st_mtime_ns
    time.sleep(3)
    assert beat.stat().st_mtime_ns == stamp, "the hopping process outlived the run"
    document = json.loads(result.read_text())
    assert document["status"] == "IssuesFound" and document["exit_code"] == 1


def test_forged_verdict_lines_reach_the_log_only_as_rule_output(
    tmp_path: Path, rules_file: Path
) -> None:
    """Rule code writes rule_status and evaluation_finished lines saying NoIssuesFound on every
    descriptor it holds (stdout, stderr, the log's pipe, the control pipe...) and through the
    evaluator's own loggers, then fires: every stdout line is JSON, the only verdict lines are
    the supervisor's (InProgress then IssuesFound, one evaluation_finished, exit 1), and the
    forged lines are rule_output lines."""
    run = _custom(EvaluatorCli(tmp_path), rules_file, "ForgesLog")
    assert run.returncode == 1, run.describe()
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert all(isinstance(line, dict) for line in lines), run.describe()
    statuses = [line for line in lines if line["event"] == "rule_status"]
    assert [s["status"] for s in statuses] == ["InProgress", "IssuesFound"], run.describe()
    finished = [line for line in lines if line["event"] == "evaluation_finished"]
    assert len(finished) == 1 and finished[0]["status"] == "IssuesFound", run.describe()
    assert finished[0]["exit_code"] == 1 and lines[-1] == finished[0]
    forged = [
        line["stream"]
        for line in lines
        if line["event"] == "rule_output" and "NoIssuesFound" in line["text"]
    ]
    assert {"stdout", "stderr", "log"} <= set(forged), run.describe()
