"""An MLflow run written by the real ``lightning`` package's ``MLFlowLogger``
(``tests/fixtures/mlflow_runs/lightning_real_mlflow_overfit``, made by ``tools/make_tb_logs``): the
same Trainer logged the same training to TensorBoard (``TensorBoardLogger``) and to a SQLite
store (``mlflow.db``) at once. Read as ``--trial-dir runs:/<id>`` with that store, its keys map
as docs/mlflow.md says, its values equal MLflow's own ``get_metric_history`` and the TensorBoard
log's, and every built-in rule gives the verdict, fired step and diagnosis it gives on the
TensorBoard log."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mlflow")
pytest.importorskip("tensorboard")

from evaluator.modes import ModeKeys  # noqa: E402
from evaluator.trial import create_trial  # noqa: E402
from tests.support.evaluator_cli import EvaluatorCli  # noqa: E402
from tests.support.real_runs import judge_log  # noqa: E402
from tests.support.tb_logs import oracle_values  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "mlflow_runs"
RUN = "lightning_real_mlflow_overfit"
TB_FOLDER = ROOT / RUN / "lightning_logs" / "version_0"
TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL
KEYS = {"train_loss_step", "train_loss_epoch", "val_loss", "epoch"}
# key -> (tensor, mode), as docs/mlflow.md's table maps Lightning's keys
PLACES = {
    "train_loss_step": ("loss", TRAIN),
    "val_loss": ("loss", EVAL),
    "train_loss_epoch": ("loss_epoch", TRAIN),
    "epoch": ("epoch", TRAIN),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A copy of the fixture's SQLite store (MLflow may write to a store it opens), brought up
    to the installed MLflow's schema with MLflow's own command when it is older."""
    db = tmp_path_factory.mktemp("lightning-mlflow") / "mlflow.db"
    shutil.copyfile(ROOT / RUN / "mlflow.db", db)
    uri = f"sqlite:///{db}"
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        MlflowClient(uri).get_run(_run_id())
    except MlflowException as e:
        if "mlflow db upgrade" not in str(e):
            raise
        subprocess.run([sys.executable, "-m", "mlflow", "db", "upgrade", uri], check=True)
    return uri


def labels(run: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / run / "labels.json").read_text())
    return loaded


def _run_id() -> str:
    return str(labels(RUN)["mlflow_run_id"])


def _history(uri: str, key: str) -> dict[int, float]:
    """MLflow's own history of ``key``: step -> the value logged last at it."""
    from mlflow import MlflowClient

    metrics = MlflowClient(uri).get_metric_history(_run_id(), key)
    ordered = sorted(enumerate(metrics), key=lambda im: (im[1].timestamp, im[0]))
    return {m.step: m.value for _, m in ordered}


def test_the_run_is_lightnings_own(store: str) -> None:
    """Written by lightning's MLFlowLogger (no imitation), finished, with the keys Lightning
    names for ``self.log("train_loss", on_step=True, on_epoch=True)`` and
    ``self.log("val_loss")``, and the module's hyperparameters as params."""
    from mlflow import MlflowClient

    want = labels(RUN)
    assert want["writer"] == "lightning.pytorch.loggers.TensorBoardLogger + MLFlowLogger"
    assert want["versions"]["lightning"] == "2.6.6" and "mlflow" in want["versions"]
    run = MlflowClient(store).get_run(_run_id())
    assert run.info.status == "FINISHED"
    assert set(run.data.metrics) == KEYS
    assert run.data.params == {"lr": "0.003"}
    assert set(oracle_values(TB_FOLDER)) == KEYS | {"hp_metric"}


def test_keys_map_as_documented_with_mlflows_values(store: str) -> None:
    """train_loss_step -> loss TRAIN, val_loss -> loss EVAL, train_loss_epoch -> loss_epoch
    TRAIN, epoch -> epoch TRAIN, at MLflow's steps; every value is get_metric_history's (the
    last at a step), and the TensorBoard log's value of the same tag at that step."""
    measured = labels(RUN)["measured"]
    per_epoch = measured["steps_per_epoch"]
    epoch_ends = [per_epoch * (e + 1) - 1 for e in range(len(measured["val_loss"]))]
    board = oracle_values(TB_FOLDER)
    with create_trial(f"runs:/{_run_id()}", mlflow_tracking_uri=store) as trial:
        assert trial.kind == "mlflow"
        assert set(trial.tensor_names()) == {"loss", "loss_epoch", "epoch"}
        assert trial.tensor_names(collection="losses") == ["loss", "loss_epoch"]
        assert trial.tensor("loss").steps(mode=TRAIN) == list(range(measured["optimizer_steps"]))
        assert trial.tensor("loss").steps(mode=EVAL) == epoch_ends
        assert trial.tensor("loss_epoch").steps(mode=TRAIN) == epoch_ends
        for key, (name, mode) in PLACES.items():
            history = _history(store, key)
            assert trial.tensor(name).steps(mode=mode) == sorted(history), key
            assert sorted(board[key]) == sorted(history), key
            for step, value in history.items():
                read = float(trial.tensor(name).value(step, mode=mode))
                assert read == value, (key, step)
                assert np.float32(read) == np.float32(board[key][step]), (key, step)


def test_every_rule_gives_the_tensorboard_logs_verdict(store: str) -> None:
    """Every built-in rule with default parameters: on the MLflow run, the verdict, fired step
    and diagnosis it gives on the TensorBoard log of the same training; Overfit fires."""
    ours = {
        r: v.cell for r, v in judge_log(f"runs:/{_run_id()}", mlflow_tracking_uri=store).items()
    }
    board = {r: v.cell for r, v in judge_log(TB_FOLDER).items()}
    assert ours == board
    assert ours["Overfit"].startswith("fires at")


def _rule(tmp_path: Path, *args: str) -> dict[str, Any]:
    run = EvaluatorCli(tmp_path)(*args)
    assert run.result is not None, run.describe()
    (rule,) = run.result["rules"]
    return rule


def test_the_command_reads_the_run_by_its_uri(store: str, tmp_path: Path) -> None:
    """``--trial-dir runs:/<id> --mlflow-tracking-uri sqlite:///...`` as a user runs it: Overfit
    fires (exit 1) at the TRAIN step it fires at on the TensorBoard log."""
    ours = _rule(tmp_path / "mlflow", "--trial-dir", f"runs:/{_run_id()}",
                 "--mlflow-tracking-uri", store, "--rule", "Overfit")  # fmt: skip
    board = _rule(tmp_path / "tb", "--trial-dir", str(TB_FOLDER), "--rule", "Overfit")
    assert ours["status"] == board["status"] == "IssuesFound" and ours["exit_code"] == 1
    assert (ours["step"], ours["fired_modes"]) == (board["step"], board["fired_modes"])
