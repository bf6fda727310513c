"""MLflow runs as trials, written by the real ``mlflow`` library: a SQLite store, a legacy file
store (written by current MLflow with its MLFLOW_ALLOW_FILE_STORE opt-in), and a real
``mlflow server`` on 127.0.0.1. Values read equal ``MlflowClient().get_metric_history``; the
same training logged to TensorBoard and to MLflow gets the same verdict, fired step and
diagnosis; a live run is followed until its status ends it; bad input is a clear ClientError."""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mlflow")

from evaluator.errors import ClientError  # noqa: E402
from evaluator.modes import ModeKeys  # noqa: E402
from evaluator.trial import create_trial  # noqa: E402
from tests.support.mlflow_runs import hf_mlflow_metrics, log_run, start_server  # noqa: E402
from tests.support.real_runs import WILD, judge_log  # noqa: E402

RULES = ["LossNotDecreasing", "Overfit", "Overtraining", "LossSpike", "GradientNormSpike"]
# Wild runs (shared/data/wild-hf-dev) whose trainer state is logged to MLflow as Hugging Face's
# MLflowCallback logs it: the first few by name, to keep the test short.
WILD_RUNS = sorted(p.stem for p in (WILD / "raw").glob("*.json"))[:6] if WILD.is_dir() else []


@pytest.fixture(scope="module")
def sqlite_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with start_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url


@pytest.fixture
def file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.7+ writes one only so
    return f"file://{tmp_path / 'mlruns'}"


def _training(steps: int = 40) -> list[tuple[str, int, float]]:
    """A run's metrics: a falling training loss, a validation loss that turns up (overfit),
    a gradient norm, a learning rate, and a key holding +/-inf and NaN."""
    out = []
    for s in range(steps):
        out += [("train_loss", s, 2.0 / (1 + s)), ("grad_norm", s, 1.0 + 0.01 * s)]
        out += [("learning_rate", s, 1e-3), ("val_loss", s, 1.0 + abs(s - 15) * 0.05)]
    out += [("odd", 0, math.inf), ("odd", 1, -math.inf), ("odd", 2, math.nan)]
    return out


def _open(location: str, uri: str | None = None, **options: Any) -> Any:
    return create_trial(location, mlflow_tracking_uri=uri, poll_interval=0.05, **options)


def _same_as_mlflows_history(trial: Any, uri: str, run_id: str) -> None:
    """Every key's values, step by step, as MlflowClient().get_metric_history gives them."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    places = {"train_loss": ("loss", ModeKeys.TRAIN), "val_loss": ("loss", ModeKeys.EVAL)}
    for key in ("train_loss", "val_loss", "grad_norm", "learning_rate", "odd"):
        name, mode = places.get(key, (key, ModeKeys.TRAIN))
        history = client.get_metric_history(run_id, key)
        assert len(history) == len(trial.tensor(name).steps(mode=mode)) > 0
        for metric in history:
            read = float(trial.tensor(name).value(metric.step, mode=mode))
            expected = metric.value
            if abs(expected) >= 1.7976931348623157e308:  # MLflow's spelling of +/-inf
                expected = math.copysign(math.inf, expected)
            assert read == expected or (math.isnan(read) and math.isnan(expected)), key


def test_a_sqlite_run_reads_as_mlflows_own_history(sqlite_uri: str) -> None:
    """runs:/<id> in a SQLite store: phase words give the modes (train_loss -> TRAIN loss,
    val_loss -> EVAL loss), values equal get_metric_history, +/-inf and NaN kept."""
    run_id = log_run(sqlite_uri, _training())
    with _open(f"runs:/{run_id}", sqlite_uri) as trial:
        assert trial.kind == "mlflow"
        assert set(trial.tensor_names()) == {"loss", "grad_norm", "learning_rate", "odd"}
        assert trial.tensor_names(collection="losses") == ["loss"]
        assert trial.tensor_names(collection="gradients") == ["grad_norm"]
        assert trial.mode_modestep(2 * 7 + 1) == (ModeKeys.EVAL, 7)
        odd = [float(trial.tensor("odd").value(s, mode=ModeKeys.TRAIN)) for s in range(3)]
        assert odd[:2] == [math.inf, -math.inf] and math.isnan(odd[2])
        _same_as_mlflows_history(trial, sqlite_uri, run_id)


def test_steps_past_two_to_the_62_are_a_data_problem_not_an_overflow(sqlite_uri: str) -> None:
    """With phases the global step is 2 x step (+1): a value at a step past 2**62 - 1 would
    overflow it (and send the rule to step -2**63 first), so it is left out, and said."""
    huge = 1 << 62
    run_id = log_run(sqlite_uri, [*_training(5), ("train_loss", huge, 0.5)])
    with _open(f"runs:/{run_id}", sqlite_uri) as trial:
        steps = trial.steps()
        assert steps == sorted(steps) and min(steps) >= 0 and max(steps) < 2 * 5
        assert trial.tensor("loss").steps(mode=ModeKeys.TRAIN) == list(range(5))
        [problem] = trial.data_problems
        assert problem["problem"] == "step_too_large" and problem["tensor"] == "train_loss"
        assert "1 value(s)" in problem["detail"]


def test_a_file_store_run_reads_by_folder_and_by_run_uri(file_store: str) -> None:
    """A legacy file store's run folder (mlruns/<experiment>/<run>) opens as an MLflow trial,
    and so does runs:/<id> with the mlruns folder as the store: both read the same values."""
    run_id = log_run(file_store, _training(20))
    mlruns = Path(file_store.removeprefix("file://"))
    folder = next(mlruns.glob(f"*/{run_id}"))
    with _open(str(folder), idle_scans_to_complete=1) as by_folder:
        assert by_folder.kind == "mlflow"
        _same_as_mlflows_history(by_folder, file_store, run_id)
    with _open(f"runs:/{run_id}", str(mlruns)) as by_uri:
        _same_as_mlflows_history(by_uri, file_store, run_id)


def test_a_tracking_server_run_reads_as_mlflows_own_history(server: str) -> None:
    """runs:/<id> on a real mlflow server reads what get_metric_history gives."""
    run_id = log_run(server, _training())
    with _open(f"runs:/{run_id}", server) as trial:
        _same_as_mlflows_history(trial, server, run_id)


def test_phase_child_runs_give_their_keys_a_mode(sqlite_uri: str) -> None:
    """Child runs named train and val under the run give their 'loss' TRAIN and EVAL steps,
    as a TensorBoard run's phase folders do."""
    parent = log_run(sqlite_uri, [], status=None)  # only its child runs log
    log_run(sqlite_uri, [("loss", s, 1.0 / (1 + s)) for s in range(5)], run_name="train",
            parent=parent)  # fmt: skip
    log_run(sqlite_uri, [("loss", s, 2.0) for s in range(5)], run_name="val", parent=parent)
    from mlflow import MlflowClient

    MlflowClient(sqlite_uri).set_terminated(parent)
    with _open(f"runs:/{parent}", sqlite_uri) as trial:
        loss = trial.tensor("loss")
        assert loss.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3, 4]
        assert float(loss.value(4, mode=ModeKeys.EVAL)) == 2.0
        assert float(loss.value(4, mode=ModeKeys.TRAIN)) == 0.2


def test_a_live_run_is_polled_until_its_status_ends_it(sqlite_uri: str) -> None:
    """A RUNNING run's new values are picked up; FINISHED ends the trial."""
    from mlflow import MlflowClient

    client = MlflowClient(sqlite_uri)
    run_id = log_run(sqlite_uri, [("loss", s, 1.0) for s in range(3)], status=None)
    with _open(f"runs:/{run_id}", sqlite_uri) as trial:
        assert not trial.training_ended()

        def later() -> None:
            time.sleep(0.3)
            for s in range(3, 8):
                client.log_metric(run_id, "loss", 0.5, step=s)
            client.set_terminated(run_id, "KILLED")

        writer = threading.Thread(target=later)
        writer.start()
        trial.wait_for_steps([7])
        writer.join()
        deadline = time.monotonic() + 20
        while not trial.loaded_all_steps and time.monotonic() < deadline:
            trial.refresh_data()
            time.sleep(0.05)
        assert trial.training_ended() and trial.steps() == list(range(8))


def _judged(location: str, uri: str | None = None) -> dict[str, Any]:
    options = {} if uri is None else {"mlflow_tracking_uri": uri}
    return {rule: verdict.cell for rule, verdict in judge_log(location, RULES, **options).items()}


@pytest.mark.slow
@pytest.mark.skipif(not WILD_RUNS, reason=f"SKIPPED LOUDLY: no wild runs at {WILD}")
@pytest.mark.parametrize("store", ["sqlite", "server", "file"])
def test_the_same_training_gets_tensorboards_verdict(
    store: str, request: pytest.FixtureRequest
) -> None:
    """Real runs (wild-hf-dev): their history logged to MLflow as Hugging Face's MLflowCallback
    logs it (loss, eval_loss, grad_norm ... at the global step) gets, from every rule, the
    verdict, fired step and diagnosis the run's TensorBoard log (its TensorBoardCallback's)
    gets."""
    uri = request.getfixturevalue(
        {"sqlite": "sqlite_uri", "server": "server"}.get(store, "file_store")
    )
    for name in WILD_RUNS:
        run_id = log_run(uri, hf_mlflow_metrics(WILD / "raw" / f"{name}.json"), experiment=name)
        ours = _judged(f"runs:/{run_id}", uri)
        assert ours == _judged(str(WILD / "tb" / name)), name


def test_an_unknown_run_is_a_client_error_naming_it(sqlite_uri: str) -> None:
    """A run id the store does not hold: ClientError naming the run and the store."""
    log_run(sqlite_uri, [("loss", 0, 1.0)])  # the store exists
    with pytest.raises(
        ClientError, match=r"runs:/0123456789abcdef0123456789abcdef in sqlite.*does not exist"
    ):
        _open("runs:/0123456789abcdef0123456789abcdef", sqlite_uri)


def test_an_unreachable_store_fails_within_its_deadline_without_credentials() -> None:
    """A tracking server that refuses connections fails within mlflow_request_deadline,
    saying so and naming the store without its user name and password."""
    started = time.monotonic()
    with pytest.raises(ClientError, match="could not be reached .*Connection refused") as caught:
        _open("runs:/0123abcd", "http://bob:hunter2@127.0.0.1:9", mlflow_request_deadline=2)
    assert time.monotonic() - started < 10
    assert "hunter2" not in str(caught.value) and "bob" not in str(caught.value)
    assert "http://127.0.0.1:9" in str(caught.value)


def test_a_silent_store_fails_at_its_deadline_without_credentials() -> None:
    """A tracking server that accepts and never answers fails at mlflow_request_deadline,
    naming the store without its user name and password."""
    from tests.support.stalling_endpoints import BlackHole

    with BlackHole() as hole:
        uri = hole.endpoint.replace("http://", "http://bob:hunter2@")
        started = time.monotonic()
        with pytest.raises(ClientError, match="did not answer") as caught:
            _open("runs:/0123abcd", uri, mlflow_request_deadline=2)
    assert time.monotonic() - started < 10
    assert "hunter2" not in str(caught.value) and hole.endpoint in str(caught.value)


class _ClosedAfter(logging.Handler):
    """A log handler whose stream is closed once the call under test is over: what it is
    still given after that would be written to a closed stream."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.closed = False
        self.late: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.closed:
            self.late.append(f"{record.threadName}: {record.getMessage()[:120]}")


def _mlflow_threads(besides: frozenset[threading.Thread] = frozenset()) -> list[str]:
    """The names of MLflow calls' threads alive now, but those of ``besides``."""
    alive = set(threading.enumerate()) - besides
    return [t.name for t in alive if t.name.startswith("mlflow")]


def test_a_request_given_up_at_its_deadline_leaves_no_thread_retrying() -> None:
    """A tracking server that accepts and never answers: the call fails at its deadline, and
    no thread of it is left retrying (nor logging its retries) a few seconds after."""
    from tests.support.stalling_endpoints import BlackHole

    handler = _ClosedAfter()
    before = frozenset(threading.enumerate())
    logging.getLogger().addHandler(handler)
    try:
        with BlackHole() as hole, pytest.raises(ClientError, match="did not answer"):
            _open("runs:/0123abcd", hole.endpoint, mlflow_request_deadline=2)
        handler.closed = True
        bound = time.monotonic() + 3
        while _mlflow_threads(before) and time.monotonic() < bound:
            time.sleep(0.1)
        assert _mlflow_threads(before) == []
        time.sleep(0.5)
    finally:
        logging.getLogger().removeHandler(handler)
    assert handler.late == []


def test_a_missing_metric_names_the_key_to_log(sqlite_uri: str, tmp_path: Path) -> None:
    """The command on a run without the loss a rule reads: exit 2, Insufficient information
    naming the metric key to log."""
    from container.cli import evaluate

    run_id = log_run(sqlite_uri, [("accuracy", s, 0.5) for s in range(30)])
    argv = ["--trial-dir", f"runs:/{run_id}", "--mlflow-tracking-uri", sqlite_uri,
            "--rule", "Overfit", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    result = json.loads((tmp_path / "out" / "rule_evaluation_result.json").read_text())
    rule = result["rules"][0]
    assert code == 2 and rule["error_type"] == "InsufficientInformationForRuleInvocation"
    assert (
        "log the metric key 'val_loss'" in rule["details"] and "docs/mlflow.md" in rule["details"]
    )


def test_the_command_reads_a_run_from_mlflows_variable(sqlite_uri: str, tmp_path: Path) -> None:
    """MLFLOW_TRACKING_URI names the store of --trial-dir runs:/<id>; the run's status ends the
    evaluation (no idle scans), and an overfitting run fires Overfit (exit 1)."""
    from container.cli import evaluate

    run_id = log_run(sqlite_uri, _training())
    env = {**os.environ, "MLFLOW_TRACKING_URI": sqlite_uri}
    argv = ["--trial-dir", f"runs:/{run_id}", "--rule", "Overfit", "--output-dir",
            str(tmp_path / "out")]  # fmt: skip
    code = evaluate(argv, env, opt_ml_root=str(tmp_path / "opt_ml"))
    result = json.loads((tmp_path / "out" / "rule_evaluation_result.json").read_text())
    assert code == 1 and result["rules"][0]["status"] == "IssuesFound", result["rules"][0]
    assert result["trial"] == f"runs:/{run_id}"
    assert np.isfinite(result["rules"][0]["step"])


@pytest.mark.parametrize("store", ["sqlite", "server"])
def test_write_back_tags_the_run_and_logs_the_report(
    store: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """After a run with --mlflow-write-back, get_run(id).data.tags holds each rule's status,
    fired step and diagnosis, and the report and result file are among its artifacts."""
    from mlflow import MlflowClient

    from container.cli import evaluate

    uri = request.getfixturevalue("sqlite_uri" if store == "sqlite" else "server")
    run_id = log_run(uri, _training())
    argv = ["--trial-dir", f"runs:/{run_id}", "--mlflow-tracking-uri", uri,
            "--rule", "Overfit,LossNotDecreasing", "--mlflow-write-back", "true",
            "--output-dir", str(tmp_path / "out")]  # fmt: skip
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    result = json.loads((tmp_path / "out" / "rule_evaluation_result.json").read_text())
    overfit = next(r for r in result["rules"] if r["rule"] == "Overfit")
    client = MlflowClient(uri)
    tags = client.get_run(run_id).data.tags
    assert code == 1 and tags["rule_evaluator.Overfit.status"] == "IssuesFound"
    assert tags["rule_evaluator.Overfit.fired_step"] == str(overfit["fired_steps"][0])
    diagnosis = overfit["evidence"]["reasons"][0].get("diagnosis")
    assert diagnosis and tags["rule_evaluator.Overfit.diagnosis"] == diagnosis
    assert tags["rule_evaluator.LossNotDecreasing.status"] in ("NoIssuesFound", "IssuesFound")
    listed = {f.path for f in client.list_artifacts(run_id, "rule_evaluator")}
    assert listed == {
        "rule_evaluator/rule_evaluation_result.json",
        "rule_evaluator/rule_report.html",
    }


def test_write_back_on_a_trial_that_is_no_run_is_a_configuration_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--mlflow-write-back with a folder trial: exit 2, a ClientError naming the flag."""
    from container.cli import evaluate

    (tmp_path / "trial").mkdir()
    argv = ["--trial-dir", str(tmp_path / "trial"), "--rule", "Overfit",
            "--mlflow-write-back", "true", "--output-dir", str(tmp_path / "out")]  # fmt: skip
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    assert code == 2
    assert "ClientError: --mlflow-write-back (mlflow_write_back)" in capsys.readouterr().err


def test_a_failing_write_back_leaves_the_verdict(
    sqlite_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Write-back to a deleted run (MLflow refuses its tags): the verdict and exit code stand,
    and the failure is a warning naming the run."""
    from mlflow import MlflowClient

    from container.cli import evaluate

    run_id = log_run(sqlite_uri, _training())
    MlflowClient(sqlite_uri).delete_run(run_id)  # still read, no longer written
    argv = ["--trial-dir", f"runs:/{run_id}", "--mlflow-tracking-uri", sqlite_uri,
            "--rule", "Overfit", "--mlflow-write-back", "true",
            "--output-dir", str(tmp_path / "out")]  # fmt: skip
    code = evaluate(argv, dict(os.environ), opt_ml_root=str(tmp_path / "opt_ml"))
    assert code == 1
    said = capsys.readouterr().out
    assert "mlflow write-back failed" in said and run_id in said


def test_summary_shows_how_a_run_maps(sqlite_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    """rule-evaluator summary runs:/<id> --mlflow-tracking-uri URI prints the run's mapping."""
    from container.cli import run

    run_id = log_run(sqlite_uri, _training(12))
    code = run(["summary", f"runs:/{run_id}", "--mlflow-tracking-uri", sqlite_uri])
    out = capsys.readouterr().out
    assert code == 0 and "train_loss -> loss (TRAIN), val_loss -> loss (EVAL)" in out
    # each mode's count, and the steps MLflow holds (not the global steps 2s / 2s + 1)
    assert re.search(r"steps per mode  TRAIN 12 \(logged steps \d+\.\.\d+\), EVAL 12 \(logged", out)
