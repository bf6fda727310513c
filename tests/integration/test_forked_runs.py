"""Runs forked by the watch's fork server (``container.forkserver``, driven through
``container.watch.forks.ForkServer``) are supervised as a started run is: they are forks of the
server (sharing what it loaded), give the verdict a single run gives, rule code in them cannot
signal their supervisor nor leave a process behind, and a server that dies takes its runs
with it and is replaced at the next start."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from container.watch.forks import LOST_CODE, ForkServer
from tests.integration.test_hostile_rules import RULES, _alive
from tests.support.evaluator_cli import ROOT, EvaluatorCli
from tests.support.waits import wait_for_file, wait_until

EXAMPLE = str(ROOT / "examples" / "trials" / "vanishing_gradients")
RESULT = "rule_evaluation_result.json"


@pytest.fixture
def server() -> Iterator[ForkServer]:
    forks = ForkServer()
    yield forks
    forks.close()


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.py"
    path.write_text(RULES)
    return path


def _start(server: ForkServer, tmp_path: Path, *args: str) -> tuple[int, Path]:
    """Start ``rule-evaluator ARGS --output-dir <tmp>/out``; the supervisor's pid, the log."""
    (tmp_path / "opt_ml" / "output").mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ["PATH"], "EVALUATOR_OPT_ML": str(tmp_path / "opt_ml")}
    log = tmp_path / "run.log"
    argv = [*args, "--output-dir", str(tmp_path / "out"), "--log-format", "json"]
    return server.start(argv, env, str(log)), log


def _wait(server: ForkServer, pid: int, timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        server.poll()
        code = server.exit_code(pid)
        if code is not None:
            return code
        time.sleep(0.05)
    raise AssertionError(f"run {pid} did not end within {timeout} s")


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _children(pid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid_or(int(p)) == pid]


def _ppid_or(pid: int) -> int | None:
    try:
        return _parent(pid)
    except (OSError, IndexError, ValueError):
        return None


def test_a_forked_run_is_a_fork_of_the_server_and_gives_the_single_runs_verdict(
    tmp_path: Path, server: ForkServer, rules_file: Path
) -> None:
    """The supervisor is the server's child and the evaluation the supervisor's, both running
    the server's program (no new interpreter: ``python -c ...forkserver...``); the result
    file's verdict is the one the started command gives."""
    pid, log = _start(server, tmp_path / "forked", "--trial-dir", EXAMPLE, "--rule", "Sleeps",
                      "--source_s3_uri", str(rules_file))  # fmt: skip
    result = tmp_path / "forked" / "out" / RESULT
    wait_for_file(result)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert b"container.forkserver" in cmdline
    children = _children(pid)
    assert len(children) == 1 and Path(f"/proc/{children[0]}/cmdline").read_bytes() == cmdline
    server.signal(pid, signal.SIGTERM)
    assert _wait(server, pid) == 143, log.read_text()
    assert json.loads(result.read_text())["status"] == "Stopped"

    pid, log = _start(server, tmp_path / "verdict", "--trial-dir", EXAMPLE,
                      "--rule", "VanishingGradient")  # fmt: skip
    code = _wait(server, pid)
    single = EvaluatorCli(tmp_path / "single")(
        "--trial-dir", EXAMPLE, "--rule", "VanishingGradient"
    )
    forked = json.loads((tmp_path / "verdict" / "out" / RESULT).read_text())
    assert (code, forked["status"]) == (single.returncode, single.result["status"]), log.read_text()


@pytest.mark.parametrize("how", ["kill", "group", "subprocess"])
def test_rule_code_in_a_forked_run_cannot_stop_its_supervisor(
    tmp_path: Path, server: ForkServer, rules_file: Path, how: str
) -> None:
    """As ``test_rule_code_cannot_stop_the_supervisor``, through the fork server: the forked
    child is confined like a started one."""
    pid, log = _start(server, tmp_path, "--trial-dir", EXAMPLE, "--rule", "SignalsSupervisor",
                      "--source_s3_uri", str(rules_file), "--how", how)  # fmt: skip
    assert _wait(server, pid) == 0, log.read_text()
    assert json.loads((tmp_path / "out" / RESULT).read_text())["status"] == "NoIssuesFound"


def test_a_process_rule_code_leaves_behind_dies_with_the_forked_run(
    tmp_path: Path, server: ForkServer, rules_file: Path
) -> None:
    """As ``test_a_double_forked_setsid_process_dies_with_the_run``, through the fork server."""
    pidfile, result = tmp_path / "escapee.pid", tmp_path / "out" / RESULT
    pid, log = _start(server, tmp_path, "--trial-dir", EXAMPLE, "--rule", "Escapes",
                      "--source_s3_uri", str(rules_file), "--pidfile", str(pidfile),
                      "--result", str(result))  # fmt: skip
    assert _wait(server, pid) == 1, log.read_text()
    assert not _alive(int(pidfile.read_text()))
    assert json.loads(result.read_text())["status"] == "IssuesFound"


def test_a_killed_server_ends_its_runs_and_the_next_start_begins_a_new_one(
    tmp_path: Path, server: ForkServer, rules_file: Path
) -> None:
    """SIGKILL of the server: its run is reported ended (``LOST_CODE``), the run's supervisor
    and evaluation die with it, and the next run starts on a new server."""
    pid, _ = _start(server, tmp_path / "a", "--trial-dir", EXAMPLE, "--rule", "Sleeps",
                    "--source_s3_uri", str(rules_file))  # fmt: skip
    result = tmp_path / "a" / "out" / RESULT
    wait_for_file(result)
    child = _children(pid)[0]
    os.kill(_parent(pid), signal.SIGKILL)
    assert _wait(server, pid) == LOST_CODE
    wait_until(lambda: not (_alive(pid) or _alive(child)), timeout=10)
    assert not _alive(pid) and not _alive(child), "a run outlived its fork server"
    again, log = _start(
        server, tmp_path / "b", "--trial-dir", EXAMPLE, "--rule", "VanishingGradient"
    )
    assert _wait(server, again) in (0, 1), log.read_text()
