"""``rule-evaluator watch``: runs copied into a watched folder are each evaluated as a single
run evaluates them, listed in watch_status.json and on /metrics, notified once per status
change, stopped cleanly by SIGTERM, and never notified again by a restarted watch
(container/watch)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluator.testing.tb_writer import write_scalars
from tests.support.watch_process import ROOT, WatchProcess, final_result, webhook_receiver

RULE = "ExplodingTensor"
POLL = "0.3"
FIRES_AT = 20
RESULT = "rule_evaluation_result.json"
SETTLE = 30.0  # the bound: a result within 30 s of the run's data being complete


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver on 127.0.0.1 and the bodies it was POSTed."""
    with webhook_receiver() as found:
        yield found


def _loss(explodes: bool) -> list[tuple[int, float]]:
    return [(s, float("nan") if explodes and s >= FIRES_AT else 2.0 / (s + 1)) for s in range(40)]


def _copy_in(stage: Path, root: Path, name: str, *, explodes: bool, phase: str = "") -> Path:
    """Write a run in ``stage``, then move it into ``root`` at once, as a finished copy."""
    write_scalars(stage / name / phase, {"loss": _loss(explodes)})
    target = root / name
    target.parent.mkdir(parents=True, exist_ok=True)
    (stage / name).rename(target)
    return target


class Watch(WatchProcess):
    """A ``rule-evaluator watch`` of ``RULE`` over ``root`` into ``out``, notifying
    ``webhook_url``."""

    def __init__(
        self,
        root: Path | str,
        out: Path,
        webhook_url: str,
        log: Path,
        *,
        idle_scans: int = 3,
        more: tuple[str, ...] = (),
    ) -> None:
        args = [str(root), "--rule", RULE, "--output-dir", str(out), "--poll-interval", POLL,
                "--webhook-url", webhook_url, *more]  # fmt: skip
        super().__init__(args, log, {"EVALUATOR_IDLE_SCANS_TO_COMPLETE": str(idle_scans)})


def _single_run(trial: Path, out: Path) -> dict[str, Any]:
    env = {**os.environ, "EVALUATOR_IDLE_SCANS_TO_COMPLETE": "3"}
    subprocess.run(
        [sys.executable, "-m", "container.cli", "--trial-dir", str(trial), "--rule", RULE,
         "--output-dir", str(out), "--poll-interval", POLL, "--log-format", "json"],
        cwd=ROOT, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    return dict(json.loads((out / "rule_evaluation_result.json").read_text()))


def _verdict(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (document["status"], document["exit_code"], r["rule"], r["status"], r["fired_steps"])
        for r in document["rules"]
    ]


def _metric(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found, text
    return float(found.group(1))


@pytest.mark.slow
@pytest.mark.parametrize("runs_per_worker", ["50", "0"], ids=["shared-worker", "own-processes"])
def test_runs_copied_in_are_watched_notified_once_and_not_again_after_a_restart(
    tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]], runs_per_worker: str
) -> None:
    """On an empty root, a healthy and an exploding TensorBoard run copied in, then a third
    (nested, in a train/ phase folder: global steps are twice its steps), each get the verdict a single run gives within 30 s;
    watch_status.json and /metrics list them; the webhook gets one POST per status change;
    SIGTERM ends the watch within 10 s with every file in place; a restart posts nothing.
    The same in a shared worker (the default) and with each run in processes of its own."""
    url, posts = webhook
    root, out, stage = tmp_path / "runs", tmp_path / "out", tmp_path / "stage"
    root.mkdir()
    more = ("--runs-per-worker", runs_per_worker)
    watch = Watch(root, out, url, tmp_path / "watch.log", more=more)
    assert watch.get("/healthz") == "ok\n"
    runs = {
        "healthy": _copy_in(stage, root, "healthy", explodes=False),
        "exploding": _copy_in(stage, root, "exploding", explodes=True),
    }
    results = {name: final_result(out / name, SETTLE) for name in runs}
    runs["team/third"] = _copy_in(stage, root, "team/third", explodes=True, phase="train")
    results["team/third"] = final_result(out / "team/third", SETTLE)
    watch.wait_for(r"team/third ended")
    where = "in a shared worker" if runs_per_worker != "0" else "pid "
    assert watch.text().count(f"started ({where}") == 3, watch.text()

    for name, trial in runs.items():
        single = _single_run(trial, tmp_path / "single" / name)
        assert _verdict(results[name]) == _verdict(single), name
    assert results["exploding"]["rules"][0]["fired_steps"] == [FIRES_AT]

    status = json.loads((out / "watch_status.json").read_text())
    by_run = {r["run"]: r for r in status["runs"]}
    assert sorted(by_run) == sorted(runs)
    assert by_run["healthy"]["status"] == "NoIssuesFound" and by_run["healthy"]["ended"]
    for name in ("exploding", "team/third"):
        entry, fired = by_run[name], results[name]["rules"][0]["fired_steps"][0]
        assert (entry["status"], entry["fired_step"]) == ("IssuesFound", fired), entry
        assert entry["rules"][0]["rule"] == RULE and entry["updated_at"]
        assert entry["last_step"] is not None and entry["last_step"] >= fired
    page = (out / "index.html").read_text()
    assert all(f'href="{name}/rule_report.html"' in page for name in runs)

    metrics = watch.get("/metrics")
    assert _metric(metrics, 'rule_evaluator_watch_runs_ended_total{status="NoIssuesFound"}') == 1
    assert _metric(metrics, 'rule_evaluator_watch_runs_ended_total{status="IssuesFound"}') == 2
    assert _metric(metrics, f'rule_evaluator_watch_firings_total{{rule="{RULE}"}}') == 2
    assert _metric(metrics, "rule_evaluator_watch_runs_live") == 0
    assert _metric(metrics, "rule_evaluator_watch_poll_duration_seconds_count") > 0

    deadline = time.monotonic() + 15  # delivery is asynchronous: wait for every post
    while len(posts) < 6 and time.monotonic() < deadline:
        time.sleep(0.1)
    changes = sorted((p["trial"], p["status"]) for p in posts)
    expected = sorted(
        (str(trial), status)
        for name, trial in runs.items()
        for status in ("InProgress", results[name]["status"])
    )
    assert changes == expected, posts

    code, seconds = watch.terminate()
    assert code == 143 and seconds < 10, watch.text()
    assert len(json.loads((out / "watch_status.json").read_text())["runs"]) == 3
    assert all((out / name / "rule_evaluation_result.json").is_file() for name in runs)

    again = Watch(root, out, url, tmp_path / "watch-again.log")
    for name in runs:
        again.wait_for(rf"{re.escape(name)} ended earlier")
    time.sleep(2)
    assert _metric(again.get("/metrics"), "rule_evaluator_watch_runs_kept") == 3
    code, seconds = again.terminate()
    assert code == 143 and seconds < 10, again.text()
    assert len(posts) == 6, posts[6:]
    status = json.loads((out / "watch_status.json").read_text())
    assert {r["run"]: r["status"] for r in status["runs"]} == {
        name: results[name]["status"] for name in runs
    }


def _status_of(out: Path) -> dict[str, dict[str, Any]]:
    try:
        return {r["run"]: r for r in json.loads((out / "watch_status.json").read_text())["runs"]}
    except (OSError, ValueError, KeyError):
        return {}


def _wait_status(out: Path, check: Any, timeout: float = SETTLE) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = _status_of(out)
        if check(runs):
            return runs
        time.sleep(0.1)
    raise AssertionError(f"watch_status.json never got there: {_status_of(out)}")


@pytest.mark.slow
def test_a_hostile_run_is_its_own_error_and_a_stopped_run_resumes_after_a_restart(
    tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    """An smdebug trial with a FIFO for an index file ends in Error while a live run goes on;
    SIGINT ends the watch with 130 and the live run Stopped, its files written; a restart
    resumes it to the verdict a single run gives on the whole data, and leaves the broken run
    alone (no new post for it)."""
    url, posts = webhook
    root, out = tmp_path / "runs", tmp_path / "out"
    live = root / "live"
    write_scalars(live, {"loss": _loss(explodes=True)[:FIRES_AT]}, start_time=1_700_000_000)
    shutil.copytree(ROOT / "examples" / "trials" / "vanishing_gradients", root / "broken")
    victim = sorted((root / "broken" / "index").rglob("*.json"))[2]
    victim.unlink()
    os.mkfifo(victim)  # an smdebug trial's index file that would block a reader
    watch = Watch(root, out, url, tmp_path / "watch.log", idle_scans=100_000)  # stays live
    runs = _wait_status(out, lambda r: r.get("broken", {}).get("ended") and "live" in r)
    assert runs["broken"]["status"] == "Error" and runs["broken"]["exit_code"] == 2, runs
    assert "not a regular file" in runs["broken"]["message"], runs
    assert runs["live"]["status"] == "InProgress" and not runs["live"]["ended"], runs
    assert _metric(watch.get("/metrics"), 'rule_evaluator_watch_errors_total{kind="run"}') == 1
    code, seconds = watch.terminate(signal.SIGINT)
    assert code == 130 and seconds < 10, watch.text()
    stopped = json.loads((out / "live" / "rule_evaluation_result.json").read_text())
    assert (stopped["status"], stopped["exit_code"]) == ("Stopped", 130)
    assert _status_of(out)["live"]["status"] == "Stopped"
    posts_before = len(posts)

    write_scalars(live, {"loss": _loss(explodes=True)[FIRES_AT:]}, start_time=1_700_000_100)
    again = Watch(root, out, url, tmp_path / "watch-again.log")
    again.wait_for(r"broken ended earlier")
    result = final_result(out / "live", SETTLE)
    single = _single_run(live, tmp_path / "single")
    assert _verdict(result) == _verdict(single)
    assert result["rules"][0]["fired_steps"] == [FIRES_AT] and result.get("resumed")
    again.wait_for(r"live ended")  # the run's process waits for its posts before it ends
    code, _ = again.terminate()
    assert code == 143
    later = posts[posts_before:]
    # the resumed run says InProgress again, then its verdict; the broken run, nothing
    assert [(p.get("trial"), p["status"]) for p in later] == [
        (str(live), "InProgress"),
        (str(live), "IssuesFound"),
    ], later


@pytest.mark.slow
def test_two_shards_over_an_s3_prefix_evaluate_each_run_once(
    s3_server: Any, tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    """Two watches on the same S3 prefix, shards 0/2 and 1/2, one run at a time each, evaluate
    every run (one nested, one in phase folders) exactly once between them, each into its own
    output folder."""
    url, _ = webhook
    local = tmp_path / "local"
    names = ["a", "b", "c", "group/d"]
    for name in names:
        write_scalars(local / name / ("train" if name == "c" else ""), {"loss": _loss(False)})
    bucket = s3_server.new_bucket()
    s3_server.upload_folder(local, bucket, "runs")
    watches = [
        Watch(f"s3://{bucket}/runs", tmp_path / f"out{i}", url, tmp_path / f"w{i}.log",
              more=("--shard", f"{i}/2", "--max-live", "1"))
        for i in range(2)
    ]  # fmt: skip
    deadline = time.monotonic() + 60
    seen: dict[str, list[str]] = {}
    while time.monotonic() < deadline:
        seen = {}
        for i in range(2):
            for name, entry in _status_of(tmp_path / f"out{i}").items():
                if entry["ended"]:
                    seen.setdefault(name, []).append(entry["status"])
        if len(seen) == len(names):
            break
        time.sleep(0.2)
    for watch in watches:
        code, seconds = watch.terminate()
        assert code == 143 and seconds < 10, watch.text()
    assert seen == {name: ["NoIssuesFound"] for name in names}, seen
    for i in range(2):
        for name in _status_of(tmp_path / f"out{i}"):
            result = json.loads((tmp_path / f"out{i}" / name / RESULT).read_text())
            assert result["trial"] == f"s3://{bucket}/runs/{name}"
