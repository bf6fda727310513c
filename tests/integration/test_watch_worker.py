"""The watch's shared workers (container/worker, container/watch/workers.py): runs whose rules
are all built-in share one evaluation process and each gets the verdict a single run gives;
one run's hostile data is that run's Error only; a killed worker's runs get their last word,
restart in processes of their own and resume to the single run's verdict, the other
worker's runs untouched; a user's rule file keeps a process of its own; SIGTERM stops every
pooled run within 10 s with its result file written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluator.testing.tb_writer import write_scalars
from tests.support.waits import wait_until
from tests.support.watch_process import ROOT, WatchProcess, final_result, webhook_receiver

RULES = "ExplodingTensor,LossNotDecreasing"
POLL = "0.3"
SETTLE = 60.0
RESULT = "rule_evaluation_result.json"


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with webhook_receiver() as found:
        yield found


_STARTED: list[WatchProcess] = []


@pytest.fixture(autouse=True)
def _no_watch_left() -> Iterator[None]:
    """A test that fails before its SIGTERM leaves no watch (nor its workers) running."""
    yield
    while _STARTED:
        process = _STARTED.pop().process
        if process.poll() is None:
            process.kill()
            process.wait(timeout=20)


def _watch(root: Path, out: Path, log: Path, *more: str, idle_scans: int = 3) -> WatchProcess:
    args = [str(root), "--output-dir", str(out), "--poll-interval", POLL, *more]
    if "--rule" not in more:
        args += ["--rule", RULES]
    watch = WatchProcess(args, log, {"EVALUATOR_IDLE_SCANS_TO_COMPLETE": str(idle_scans)})
    _STARTED.append(watch)
    return watch


def _scalars(
    steps: range, *, nan_loss_at: int | None = None, nan_norm_at: int | None = None
) -> dict[str, list[tuple[int, float]]]:
    """A decreasing ``loss`` (NaN from ``nan_loss_at`` on) and a steady ``grad_norm`` (NaN
    at ``nan_norm_at`` only)."""
    nan = float("nan")
    return {
        "loss": [(s, nan if nan_loss_at is not None and s >= nan_loss_at else 2.0 / (s + 1))
                 for s in steps],
        "grad_norm": [(s, nan if s == nan_norm_at else 1.0) for s in steps],
    }  # fmt: skip


def _single_run(trial: Path, out: Path, *more: str) -> dict[str, Any]:
    env = {**os.environ, "EVALUATOR_IDLE_SCANS_TO_COMPLETE": "3"}
    subprocess.run(
        [sys.executable, "-m", "container.cli", "--trial-dir", str(trial), "--rule", RULES,
         "--output-dir", str(out), "--poll-interval", POLL, "--log-format", "json", *more],
        cwd=ROOT, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    return dict(json.loads((out / RESULT).read_text()))


def _verdict(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What must match a single run's byte for byte: the run's status and exit code, and
    each rule's status, firing steps, last step, steps evaluated and message."""
    head = [(document["status"], document["exit_code"])]
    return head + [
        (r["rule"], r["status"], r["fired_steps"], r["step"], r["steps_evaluated"], r["details"])
        for r in document["rules"]
    ]


def _ended_result(folder: Path, timeout: float = SETTLE) -> dict[str, Any]:
    """The result file once it holds any final status (an Error included)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            document = json.loads((folder / RESULT).read_text())
        except (OSError, ValueError):
            document = {}
        if document.get("exit_code") is not None:
            return dict(document)
        time.sleep(0.1)
    raise AssertionError(f"no final result in {folder} within {timeout} s")


def _workers(out: Path) -> dict[str, int]:
    """Each worker's log name -> its evaluation process (the child of the worker's
    supervisor; both write the log)."""
    folder = str(out / ".watch" / "workers")
    holders: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                target = os.readlink(f"/proc/{entry}/fd/1")
            except OSError:
                continue
            if target.startswith(folder):
                holders[int(entry)] = Path(target).name
    return {name: pid for pid, name in holders.items() if _parent(pid) in holders}


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
def test_runs_in_one_worker_give_single_runs_verdicts_and_hostile_data_is_its_own_error(
    tmp_path: Path,
) -> None:
    """Five runs in one worker (a healthy one, two exploding at different steps, one in a
    train/ phase folder, one whose event file is garbage): each run's status, rules'
    statuses, firing steps, last steps, steps evaluated and messages are the single run's;
    the garbage run is Error (exit 2) while the others finish right, the worker alive with
    none of their threads left."""
    root, out = tmp_path / "runs", tmp_path / "out"
    write_scalars(root / "healthy", _scalars(range(40)))
    write_scalars(root / "explodes-20", _scalars(range(40), nan_loss_at=20))
    write_scalars(root / "norm-7", _scalars(range(40), nan_norm_at=7))
    write_scalars(root / "nested" / "train", _scalars(range(40), nan_loss_at=12))
    (root / "garbage").mkdir()
    (root / "garbage" / "events.out.tfevents.1700000000.host.1.0").write_bytes(os.urandom(3000))
    names = ["healthy", "explodes-20", "norm-7", "nested", "garbage"]
    watch = _watch(root, out, tmp_path / "watch.log", "--runs-per-worker", "10")
    results = {name: _ended_result(out / name) for name in names}
    for name in names:
        watch.wait_for(rf"{re.escape(name)} ended")
    assert watch.text().count("started (in a shared worker)") == 5, watch.text()
    workers = _workers(out)
    assert list(workers) == ["worker-1.log"] and _alive(workers["worker-1.log"]), workers
    tasks = Path(f"/proc/{workers['worker-1.log']}/task")
    # the ended runs are dropped: their threads gone, the worker's loop and event loop left
    assert wait_until(lambda: len(os.listdir(tasks)) == 2, timeout=15), os.listdir(tasks)

    for name in names:
        trial = root / name
        single = _single_run(trial, tmp_path / "single" / name)
        assert _verdict(results[name]) == _verdict(single), name
    assert results["garbage"]["status"] == "Error" and results["garbage"]["exit_code"] == 2
    assert [r["fired_steps"] for r in results["explodes-20"]["rules"]][0] == [20]
    log = (out / ".watch" / "logs" / "healthy.log").read_text()
    assert '"rule_progress"' in log or '"rule_status"' in log, log
    assert "explodes-20" not in log  # each run's lines in its own log
    code, seconds = watch.terminate()
    assert code == 143 and seconds < 10, watch.text()


def _posts_by(posts: list[dict[str, Any]], trial: Path) -> dict[Any, list[str]]:
    """The statuses POSTed for ``trial``, per rule (None: a last word's ``run_closed``)."""
    found: dict[Any, list[str]] = {}
    for post in posts:
        if post.get("trial") == str(trial):
            found.setdefault(post.get("rule"), []).append(post["status"])
    return found


@pytest.mark.slow
def test_a_killed_worker_restarts_only_its_runs_which_resume_to_the_single_runs_verdict(
    tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    """Four live runs, two per worker, one rule of the first run fired already; SIGKILL of
    the first worker's evaluation process: its two runs get their last word (Error, one
    POST each), restart in processes of their own and resume, the fired rule's verdict kept
    (never POSTed again); the second worker and its runs go on untouched; every run
    reaches the verdict a single run gives on the whole data, with one POST per status
    change."""
    url, posts = webhook
    root, out = tmp_path / "runs", tmp_path / "out"
    plans = {"a": {"nan_norm_at": 5}, "b": {}, "c": {"nan_loss_at": 25}, "d": {}}
    for name, plan in plans.items():
        write_scalars(root / name, _scalars(range(20), **plan), start_time=1_700_000_000)
    watch = _watch(root, out, tmp_path / "watch.log", "--runs-per-worker", "2",
                   "--webhook-url", url, idle_scans=100_000)  # fmt: skip

    def started() -> bool:
        """Every run is InProgress, run a's ExplodingTensor IssuesFound."""
        statuses = []
        for name in plans:
            try:
                document = json.loads((out / name / RESULT).read_text())
            except (OSError, ValueError):
                return False
            statuses += [(name, document["status"])]
            statuses += [(name, r["rule"], r["status"]) for r in document["rules"]]
        return ("a", "ExplodingTensor", "IssuesFound") in statuses and all(
            s[-1] in ("InProgress", "IssuesFound") for s in statuses
        )

    assert wait_until(started, timeout=SETTLE), watch.text()
    time.sleep(1.5)  # the rules read what is there
    workers = _workers(out)
    assert sorted(workers) == ["worker-1.log", "worker-2.log"], workers
    assert re.findall(r"watch: (\w) started", watch.text()) == list("abcd")
    os.kill(workers["worker-1.log"], signal.SIGKILL)
    for name in "ab":
        watch.wait_for(rf"{name} restarted in a process of its own")
    assert _workers(out) == {"worker-2.log": workers["worker-2.log"]}
    lost = re.findall(r"watch: (\w) lost with its worker: (.*)", watch.text())
    assert [name for name, _ in lost] == ["a", "b"], watch.text()
    assert all("killed by SIGKILL" in why for _, why in lost), lost

    for name, plan in plans.items():
        write_scalars(root / name, _scalars(range(20, 40), **plan), start_time=1_700_000_100)
        (root / name / "training_job_end.ts").write_text("")
    results = {name: final_result(out / name, SETTLE) for name in plans}
    for name in plans:
        watch.wait_for(rf"watch: {name} ended")
    for name in plans:
        single = _single_run(root / name, tmp_path / "single" / name)
        assert _verdict(results[name]) == _verdict(single), name
    assert [bool(results[name].get("resumed")) for name in plans] == [True, True, False, False]
    assert results["a"]["rules"][0]["fired_steps"] == [5]

    time.sleep(1)  # the runs wait for their posts before they end; the last ones land
    for name in plans:
        by_rule = _posts_by(posts, root / name)
        for rule in results[name]["rules"]:
            kept = (name, rule["rule"]) == ("a", "ExplodingTensor")
            again = ["InProgress"] if name in "ab" and not kept else []  # once resumed
            expected = ["InProgress", *again, rule["status"]]
            assert by_rule.get(rule["rule"]) == expected, (name, rule, by_rule)
        assert by_rule.get(None, []) == (["Error"] if name in "ab" else []), (name, by_rule)
    code, seconds = watch.terminate()
    assert code == 143 and seconds < 10, watch.text()


USER_RULE = textwrap.dedent("""
    import math

    from smdebug.rules import Rule


    class NanLoss(Rule):
        def invoke_at_step(self, step):
            return math.isnan(float(self.base_trial.tensor("loss").value(step)))
""")


@pytest.mark.slow
def test_a_users_rule_file_keeps_a_process_of_its_own(tmp_path: Path) -> None:
    """A watch whose rule comes from a user's file: the worker refuses its first run, which
    starts in processes of its own as every later run does, with the single run's verdict."""
    root, out = tmp_path / "runs", tmp_path / "out"
    rule = tmp_path / "nan_loss.py"
    rule.write_text(USER_RULE)
    write_scalars(root / "first", _scalars(range(30), nan_loss_at=9))
    watch = _watch(root, out, tmp_path / "watch.log",
                   "--rule", "NanLoss", "--source_s3_uri", str(rule))  # fmt: skip
    first = final_result(out / "first", SETTLE)
    watch.wait_for(r"first needs a process of its own \(rules with code of their own")
    write_scalars(root / "second", _scalars(range(30), nan_loss_at=4))
    second = final_result(out / "second", SETTLE)
    watch.wait_for(r"second started \(pid \d+\)")
    assert [r["fired_steps"] for r in first["rules"]] == [[9]]
    assert [r["fired_steps"] for r in second["rules"]] == [[4]]
    assert wait_until(lambda: not _workers(out), timeout=10)  # the idle worker has ended
    code, seconds = watch.terminate()
    assert code == 143 and seconds < 10, watch.text()


@pytest.mark.slow
def test_sigterm_stops_every_pooled_run_within_10_s_with_its_result_file(tmp_path: Path) -> None:
    """Six live runs over two workers: SIGTERM ends the watch with 143 within 10 s, every
    run's result file Stopped (143), the status listing each Stopped."""
    root, out = tmp_path / "runs", tmp_path / "out"
    names = [f"run-{i}" for i in range(6)]
    for name in names:
        write_scalars(root / name, _scalars(range(15)))
    watch = _watch(root, out, tmp_path / "watch.log", "--runs-per-worker", "3", idle_scans=100_000)
    for name in names:
        assert wait_until(lambda name=name: (out / name / RESULT).is_file(), timeout=SETTLE)
    assert len(_workers(out)) == 2
    code, seconds = watch.terminate()
    assert code == 143 and seconds < 10, watch.text()
    for name in names:
        document = json.loads((out / name / RESULT).read_text())
        assert (document["status"], document["exit_code"]) == ("Stopped", 143), name
    status = {
        r["run"]: r["status"] for r in json.loads((out / "watch_status.json").read_text())["runs"]
    }
    assert status == dict.fromkeys(names, "Stopped"), status
