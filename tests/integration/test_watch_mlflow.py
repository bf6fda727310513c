"""``rule-evaluator watch --mlflow-experiment``: the runs of an experiment written by the real
``mlflow`` library (a SQLite store, and a real ``mlflow server`` on 127.0.0.1), found by one
paginated search per look, each evaluated as ``--trial-dir runs:/<id>`` is (same verdict), a
run added while the watch runs included; phase child runs are read with their parent, never on
their own; notified once per status change, written back to the run, never notified again
after a restart; split between shards once (container/watch/experiment.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mlflow")

from container.watch.experiment import MLFLOW_PRELOAD  # noqa: E402
from container.watch.forks import ForkServer  # noqa: E402
from evaluator.errors import ClientError  # noqa: E402
from evaluator.sources.mlflow.experiment import (  # noqa: E402
    find_experiment,
    list_runs,
    store_client,
)
from tests.support.html_check import index_rows  # noqa: E402
from tests.support.mlflow_runs import log_run, start_server  # noqa: E402
from tests.support.watch_process import (  # noqa: E402
    ROOT,
    WatchProcess,
    final_result,
    webhook_receiver,
)

RULE = "ExplodingTensor"
POLL = "0.3"
FIRES_AT = 20
SETTLE = 30.0  # the bound: a result within 30 s of the run's data being complete
RESULT = "rule_evaluation_result.json"


def _loss(explodes: bool, steps: range = range(40)) -> list[tuple[str, int, float]]:
    return [
        ("loss", s, float("nan") if explodes and s >= FIRES_AT else 2.0 / (s + 1)) for s in steps
    ]


@pytest.fixture
def sqlite_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with webhook_receiver() as found:
        yield found


def _experiment_id(uri: str, name: str) -> str:
    from mlflow import MlflowClient

    return str(MlflowClient(uri).get_experiment_by_name(name).experiment_id)


def _single_run(run_id: str, uri: str, out: Path) -> dict[str, Any]:
    """The single command's result on ``runs:/<run_id>``."""
    subprocess.run(
        [sys.executable, "-m", "container.cli", "--trial-dir", f"runs:/{run_id}", "--rule", RULE,
         "--output-dir", str(out), "--poll-interval", POLL, "--log-format", "json"],
        cwd=ROOT, env={**os.environ, "MLFLOW_TRACKING_URI": uri}, capture_output=True,
        timeout=120,
    )  # fmt: skip
    return dict(json.loads((out / RESULT).read_text()))


def _verdict(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (document["status"], document["exit_code"], r["rule"], r["status"], r["fired_steps"])
        for r in document["rules"]
    ]


def _log_live(uri: str, experiment: str) -> tuple[str, threading.Thread]:
    """An exploding run created RUNNING, its metrics logged over about two seconds, then
    ended FINISHED: its id, and the thread logging it."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(uri)
    run_id: str = client.create_run(
        _experiment_id(uri, experiment), run_name="exploding"
    ).info.run_id

    def write() -> None:
        for part in (range(0, 15), range(15, 30), range(30, 40)):
            now = int(time.time() * 1000)
            metrics = [Metric(k, v, now, s) for k, s, v in _loss(True, part)]
            client.log_batch(run_id, metrics=metrics)
            time.sleep(0.7)
        client.set_terminated(run_id, "FINISHED")

    thread = threading.Thread(target=write)
    thread.start()
    return run_id, thread


def _watch(out: Path, log: Path, *more: str, env: dict[str, str]) -> WatchProcess:
    return WatchProcess(
        ["--rule", RULE, "--output-dir", str(out), "--poll-interval", POLL, *more], log, env
    )


@pytest.mark.slow
def test_an_experiments_runs_get_the_single_commands_verdict_and_one_post_per_change(
    sqlite_uri: str, tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    """A SQLite experiment with a healthy run and a run whose train/val children hold its
    metrics, then an exploding run logged while the watch runs: each gets, under
    DIR/<experiment id>/<run id>/, the verdict `--trial-dir runs:/<id>` gives; the children
    are not runs of their own; watch_status.json shows the run names; the webhook gets one
    POST per status change and the verdict is written back to each run; SIGTERM ends it
    within 10 s; a restart posts nothing."""
    from mlflow import MlflowClient

    url, posts = webhook
    runs = {"healthy": log_run(sqlite_uri, _loss(False), experiment="team", run_name="healthy")}
    runs["phased"] = parent = log_run(sqlite_uri, [], experiment="team", run_name="phased")
    for phase in ("train", "val"):
        log_run(sqlite_uri, _loss(False), experiment="team", run_name=phase, parent=parent)
    exp = _experiment_id(sqlite_uri, "team")
    out, env = tmp_path / "out", {"MLFLOW_TRACKING_URI": sqlite_uri}
    more = ("--mlflow-experiment", "team", "--webhook-url", url, "--mlflow-write-back", "true")
    watch = _watch(out, tmp_path / "watch.log", *more, env=env)
    results = {name: final_result(out / exp / rid, SETTLE) for name, rid in runs.items()}
    runs["exploding"], writer = _log_live(sqlite_uri, "team")
    writer.join()
    results["exploding"] = final_result(out / exp / runs["exploding"], SETTLE)
    watch.wait_for(rf"{exp}/{runs['exploding']} ended")

    for name, run_id in runs.items():
        single = _single_run(run_id, sqlite_uri, tmp_path / "single" / name)
        assert _verdict(results[name]) == _verdict(single), name
        assert results[name]["trial"] == f"runs:/{run_id}"
    assert results["exploding"]["rules"][0]["fired_steps"] == [FIRES_AT]
    status = {r["run"]: r for r in json.loads((out / "watch_status.json").read_text())["runs"]}
    assert {r["run_name"]: r["status"] for r in status.values()} == {
        "healthy": "NoIssuesFound", "phased": "NoIssuesFound", "exploding": "IssuesFound"
    }  # fmt: skip
    assert sorted(status) == sorted(f"{exp}/{rid}" for rid in runs.values())
    tags = MlflowClient(sqlite_uri).get_run(runs["exploding"]).data.tags
    assert tags[f"rule_evaluator.{RULE}.status"] == "IssuesFound"
    assert tags[f"rule_evaluator.{RULE}.fired_step"] == str(FIRES_AT)

    _wait_posts(posts, 6)
    expected = [(f"runs:/{rid}", s) for n, rid in runs.items()
                for s in ("InProgress", results[n]["status"])]  # fmt: skip
    assert sorted((p["trial"], p["status"]) for p in posts) == sorted(expected), posts
    code, seconds = watch.terminate()
    assert code == 143 and seconds < 10, watch.text()

    again = _watch(out, tmp_path / "again.log", *more, env=env)
    for run_id in runs.values():
        again.wait_for(rf"{exp}/{run_id} \(\w+\) ended earlier")
    time.sleep(2)
    assert again.terminate()[0] == 143
    assert len(posts) == 6, posts[6:]


@pytest.mark.slow
def test_a_run_stopped_with_the_watch_resumes_to_the_single_commands_verdict(
    sqlite_uri: str, tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    """A RUNNING run watched when the watch is stopped ends Stopped with its result file;
    once it has logged the rest and FINISHED, the restarted watch resumes it to the verdict
    the single command gives, posting its InProgress and verdict once more."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    url, posts = webhook
    client = MlflowClient(sqlite_uri)
    run_id = log_run(sqlite_uri, _loss(True, range(FIRES_AT)), experiment="live", status=None)
    folder = tmp_path / "out" / _experiment_id(sqlite_uri, "live") / run_id
    more = (
        "--mlflow-experiment",
        "live",
        "--mlflow-tracking-uri",
        sqlite_uri,
        "--webhook-url",
        url,
    )
    watch = _watch(tmp_path / "out", tmp_path / "watch.log", *more, env={})
    deadline = time.monotonic() + SETTLE
    while not (folder / RESULT).is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2)  # its rule evaluates the steps there are
    assert watch.terminate()[0] == 143
    assert json.loads((folder / RESULT).read_text())["status"] == "Stopped"
    now = int(time.time() * 1000)
    more_metrics = [Metric(k, v, now, s) for k, s, v in _loss(True, range(FIRES_AT, 40))]
    client.log_batch(run_id, metrics=more_metrics)
    client.set_terminated(run_id, "FINISHED")
    before = len(posts)

    again = _watch(tmp_path / "out", tmp_path / "again.log", *more, env={})
    result = final_result(folder, SETTLE)
    again.wait_for(rf"{run_id} ended")
    assert again.terminate()[0] == 143
    assert _verdict(result) == _verdict(_single_run(run_id, sqlite_uri, tmp_path / "single"))
    assert result["rules"][0]["fired_steps"] == [FIRES_AT] and result.get("resumed")
    later = [(p["trial"], p["status"]) for p in posts[before:]]
    assert later == [(f"runs:/{run_id}", "InProgress"), (f"runs:/{run_id}", "IssuesFound")]


@pytest.mark.slow
def test_a_sweeps_parent_is_listed_its_trials_evaluated_and_a_quiet_run_waits(
    sqlite_uri: str, tmp_path: Path, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    """A RUNNING sweep parent with no metrics of its own and two trial child runs: the
    trials get their verdicts, the parent is listed ParentRun (its message naming its child
    runs), never Error, never fired, never posted; a RUNNING run with no metric yet is listed
    Waiting with no process, then evaluated once it logs its values and ends; index.html
    shows each run by its MLflow name, its id beside."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    url, posts = webhook
    parent = log_run(sqlite_uri, [], experiment="sweep", run_name="sweep", status=None)
    trials = {
        name: log_run(sqlite_uri, _loss(e), experiment="sweep", run_name=name, parent=parent)
        for name, e in (("trial-a", False), ("trial-b", True))
    }
    quiet = log_run(sqlite_uri, [], experiment="sweep", run_name="quiet", status=None)
    exp, out = _experiment_id(sqlite_uri, "sweep"), tmp_path / "out"
    more = ("--mlflow-experiment", "sweep", "--webhook-url", url)
    watch = _watch(out, tmp_path / "watch.log", *more, env={"MLFLOW_TRACKING_URI": sqlite_uri})
    for run_id in trials.values():
        final_result(out / exp / run_id, SETTLE)
    watch.wait_for(rf"{exp}/{quiet} \(quiet\) Waiting")
    status = {r["run_name"]: r for r in _status_runs(out)}
    assert status["quiet"]["status"] == "Waiting" and not (out / exp / quiet).exists()
    now = int(time.time() * 1000)
    client = MlflowClient(sqlite_uri)
    client.log_batch(quiet, metrics=[Metric(k, v, now, s) for k, s, v in _loss(True)])
    client.set_terminated(quiet, "FINISHED")
    final_result(out / exp / quiet, SETTLE)
    client.set_terminated(parent, "FINISHED")
    time.sleep(1)  # a look or two at the ended parent
    assert watch.terminate()[0] == 143

    status = {r["run_name"]: r for r in _status_runs(out)}
    assert {n: status[n]["status"] for n in status} == {
        "sweep": "ParentRun", "trial-a": "NoIssuesFound", "trial-b": "IssuesFound",
        "quiet": "IssuesFound",
    }  # fmt: skip
    sweep = status["sweep"]
    assert sweep["fired_step"] is None and sweep["exit_code"] is None and sweep["rules"] == []
    assert "child run(s) (trial-a, trial-b) are evaluated" in sweep["message"]
    assert not (out / exp / parent).exists()
    assert f"runs:/{parent}" not in {p["trial"] for p in posts}
    rows = {row.label: row for row in index_rows(out / "index.html")}
    assert {n: rows[n].status for n in rows} == {n: status[n]["status"] for n in status}
    for name, run_id in trials.items():  # by the run's name, its id beside, its report linked
        assert rows[name].href == f"{exp}/{run_id}/rule_report.html"
        assert rows[name].secondary == f"{exp}/{run_id}"
    assert rows["sweep"].href is None and rows["sweep"].secondary == f"{exp}/{parent}"


def test_a_single_run_on_a_sweeps_parent_names_the_child_runs_to_evaluate(
    sqlite_uri: str, tmp_path: Path
) -> None:
    """--trial-dir runs:/<parent> on a parent with no metrics of its own whose child runs
    are runs of their own: at once, exit 2, a ClientError naming those child runs."""
    from container.cli import evaluate

    parent = log_run(sqlite_uri, [], experiment="sweep", run_name="sweep", status=None)
    trials = [
        log_run(sqlite_uri, _loss(False), experiment="sweep", run_name=f"t{i}", parent=parent)
        for i in range(2)
    ]
    argv = ["--trial-dir", f"runs:/{parent}", "--mlflow-tracking-uri", sqlite_uri,
            "--rule", RULE, "--output-dir", str(tmp_path / "out")]  # fmt: skip
    started = time.monotonic()
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    assert code == 2 and time.monotonic() - started < 20
    message = json.loads((tmp_path / "out" / RESULT).read_text())["message"]
    assert "logs no metrics of its own and is the parent of 2 child run(s)" in message
    assert all(f"runs:/{t} (t{i})" in message for i, t in enumerate(trials)), message


def _wait_posts(posts: list[dict[str, Any]], count: int) -> None:
    deadline = time.monotonic() + 15  # delivery is asynchronous
    while len(posts) < count and time.monotonic() < deadline:
        time.sleep(0.1)


def test_an_experiment_the_store_does_not_hold_is_a_client_error_naming_it(
    sqlite_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--mlflow-experiment naming no experiment of the store (by name or id): exit 2 with a
    ClientError naming the experiment and the store, before anything is written."""
    from container.watch import main

    log_run(sqlite_uri, _loss(False), experiment="team")
    argv = ["--mlflow-experiment", "teem", "--mlflow-tracking-uri", sqlite_uri,
            "--rule", RULE, "--output-dir", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith("ClientError:")]
    assert said and said[0].startswith("ClientError: MLflow tracking store sqlite:///")
    assert "holds no experiment named 'teem'" in said[0]
    assert not (tmp_path / "out").exists()


def test_one_search_per_look_reads_every_page_oldest_first(sqlite_uri: str) -> None:
    """list_runs over five runs with pages of two: three search_runs requests (one search,
    paginated), every run once, oldest first; the experiment found by name and by id, a
    deleted one refused."""
    ids = [log_run(sqlite_uri, [("loss", 0, 1.0)], experiment="paged") for _ in range(5)]
    client = store_client(sqlite_uri, deadline=30)
    by_name = find_experiment(client, sqlite_uri, "paged", deadline=30)
    by_id = find_experiment(client, sqlite_uri, by_name.experiment_id, deadline=30)
    assert by_id == by_name and by_name.name == "paged"
    calls: list[Any] = []

    class Counting:
        def search_runs(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(kwargs.get("page_token"))
            return client.search_runs(*args, **kwargs)

    found = list_runs(Counting(), by_name, deadline=30, page_size=2)
    assert [r.run_id for r in found] == ids and len(calls) == 3 and calls[0] is None
    client.delete_experiment(by_name.experiment_id)
    with pytest.raises(ClientError, match="has deleted the experiment named 'paged'"):
        find_experiment(client, sqlite_uri, "paged", deadline=30)


def test_the_fork_server_of_an_experiment_has_mlflows_client_loaded(
    sqlite_uri: str, tmp_path: Path
) -> None:
    """An experiment's watch has its fork server load MLflow's client and stores before it
    forks (their pages shared by every run, not loaded by each: SQLite's module is mapped in
    the server), and a run forked from it gets the single command's verdict."""
    run_id = log_run(sqlite_uri, _loss(True))
    forks = ForkServer(preload=MLFLOW_PRELOAD)
    env = {"PATH": os.environ["PATH"], "EVALUATOR_OPT_ML": str(tmp_path / "opt_ml"),
           "MLFLOW_TRACKING_URI": sqlite_uri}  # fmt: skip
    argv = ["--trial-dir", f"runs:/{run_id}", "--rule", RULE, "--output-dir", str(tmp_path / "o")]
    try:
        pid = forks.start(argv, env, str(tmp_path / "run.log"))
        server = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        assert "/_sqlite3." in Path(f"/proc/{server}/maps").read_text()
        deadline = time.monotonic() + 60
        while (code := forks.exit_code(pid)) is None and time.monotonic() < deadline:
            forks.poll()
            time.sleep(0.05)
    finally:
        forks.close()
    assert code == 1, (tmp_path / "run.log").read_text()
    assert json.loads((tmp_path / "o" / RESULT).read_text())["rules"][0]["fired_steps"] == [20]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with start_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url


@pytest.mark.slow
def test_two_shards_over_a_tracking_servers_experiment_evaluate_each_run_once(
    server: str, tmp_path: Path
) -> None:
    """Two watches on one experiment of a real mlflow server (given by id, with
    --mlflow-tracking-uri), shards 0/2 and 1/2: every run evaluated exactly once between
    them, with its verdict."""
    names = {"a": False, "b": True, "c": False, "d": True}
    runs = {n: log_run(server, _loss(e), experiment="shards", run_name=n) for n, e in names.items()}
    exp = _experiment_id(server, "shards")
    watches = [
        _watch(tmp_path / f"out{i}", tmp_path / f"w{i}.log", "--mlflow-experiment", exp,
               "--mlflow-tracking-uri", server, "--shard", f"{i}/2", env={})
        for i in range(2)
    ]  # fmt: skip
    deadline = time.monotonic() + 90
    seen: dict[str, list[str]] = {}
    while len(seen) < len(runs) and time.monotonic() < deadline:
        seen = {}
        for i in range(2):
            for entry in _status_runs(tmp_path / f"out{i}"):
                if entry["ended"]:
                    seen.setdefault(entry["run_name"], []).append(entry["status"])
        time.sleep(0.2)
    for watch in watches:
        code, seconds = watch.terminate()
        assert code == 143 and seconds < 10, watch.text()
    assert seen == {n: ["IssuesFound" if e else "NoIssuesFound"] for n, e in names.items()}
    for i in range(2):
        for entry in _status_runs(tmp_path / f"out{i}"):
            result = json.loads((tmp_path / f"out{i}" / entry["run"] / RESULT).read_text())
            assert result["trial"] == f"runs:/{runs[entry['run_name']]}"
            assert entry["run"].startswith(f"{exp}/")


def _status_runs(out: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads((out / "watch_status.json").read_text())["runs"])
    except (OSError, ValueError, KeyError):
        return []
