"""TensorBoard runs written by the real ``lightning`` package: a ``LightningModule`` trained by
``lightning.Trainer`` with Lightning's own ``TensorBoardLogger`` (``lightning_logs/version_0``),
and, in ``lightning_real_mlflow_overfit``, the same training logged at once by Lightning's
``MLFlowLogger`` to a SQLite store beside the log (``mlflow.db``, as MLflow 3.7+ makes by
default; the run's id in ``labels.json``). One scenario per process:
``python lightning_runs.py --scenario NAME --out DIR``; labels are measured here, by the module
while it trains, never read back from the log."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.loggers import Logger, MLFlowLogger, TensorBoardLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).parent))
from common import (  # noqa: E402
    NEEDS_ACTIVATIONS,
    NEEDS_LABELS,
    OVERFIT_ALSO,
    OVERFIT_WHY,
    overfits,
    stalls,
    write_labels,
)

VERSIONS = {"lightning": L.__version__, "torch": torch.__version__, "numpy": np.__version__}
WRITER = "lightning.pytorch.loggers.TensorBoardLogger"
MLFLOW_WRITER = "lightning.pytorch.loggers.TensorBoardLogger + MLFlowLogger"


def data(n: int, seed: int, noise: float, d: int = 16) -> TensorDataset:
    """Labels of a fixed linear teacher, a fraction ``noise`` of them flipped."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    teacher = torch.randn(d, 1, generator=torch.Generator().manual_seed(99))
    y = (x @ teacher > 0).float().squeeze(1)
    flip = torch.rand(n, generator=g) < noise
    return TensorDataset(x, torch.where(flip, 1 - y, y))


class Memoriser(L.LightningModule):
    """A wide net that memorises a few noisy samples: the training loss keeps falling, the
    validation loss falls, then rises. Records every loss it computes (``measured``)."""

    def __init__(self, lr: float = 0.003) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 1))
        self.train_steps: list[float] = []
        self.train_epochs: list[float] = []
        self.val_epochs: list[float] = []
        self._epoch: list[tuple[float, int]] = []
        self._val: list[tuple[float, int]] = []

    def _loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        return nn.functional.binary_cross_entropy_with_logits(self.net(x).squeeze(1), y)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        self.train_steps.append(loss.item())
        self._epoch.append((loss.item(), len(batch[0])))
        return loss

    def on_train_epoch_end(self) -> None:
        self.train_epochs.append(_weighted_mean(self._epoch))
        self._epoch = []

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        loss = self._loss(batch)
        self.log("val_loss", loss)
        if not self.trainer.sanity_checking:
            self._val.append((loss.item(), len(batch[0])))

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            self.val_epochs.append(_weighted_mean(self._val))
        self._val = []

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


def _weighted_mean(values: list[tuple[float, int]]) -> float:
    """The mean over a pass's batches weighted by their sizes, as Lightning reduces an
    ``on_epoch`` value."""
    return sum(v * n for v, n in values) / sum(n for _, n in values)


def overfit(out: Path) -> dict:
    """64 noisy training samples in 4 batches of 16, 256 validation samples; 60 epochs (240
    optimizer steps), validation at every epoch end, ``train_loss`` logged each step."""
    return train_overfit(out, [_tensorboard(out)])


def mlflow_overfit(out: Path) -> dict:
    """The same training logged by both of Lightning's loggers at once: TensorBoardLogger and
    MLFlowLogger (a SQLite store, ``mlflow.db``, its artifacts in ``mlartifacts/``)."""
    mlflow = MLFlowLogger(
        experiment_name="lightning",
        run_name="overfit",
        tracking_uri=f"sqlite:///{out / 'mlflow.db'}",
        artifact_location=(out / "mlartifacts").as_uri(),
    )
    labels = train_overfit(out, [_tensorboard(out), mlflow])
    labels["mlflow_run_id"] = mlflow.run_id
    _compact(out / "mlflow.db")
    labels["description"] = (
        "The real Lightning Trainer with TensorBoardLogger and MLFlowLogger at once (SQLite "
        "store mlflow.db): the training of lightning_real_overfit; MLflow gets the keys "
        "TensorBoard gets as tags (train_loss_step, train_loss_epoch, val_loss, epoch), no "
        "hp_metric, the hyperparameters as run params."
    )
    return labels


def _compact(db: Path) -> None:
    """Rewrite the SQLite file with 1 KiB pages (VACUUM): the same rows in under half the
    bytes, as MLflow's ~200 tables and indexes each take a page at least."""
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("PRAGMA page_size=1024")
        connection.execute("VACUUM")


def _tensorboard(out: Path) -> TensorBoardLogger:
    return TensorBoardLogger(str(out), name="lightning_logs", version=0)


def train_overfit(out: Path, loggers: list[Logger]) -> dict:
    """The overfitting training, logged by ``loggers``; its labels."""
    L.seed_everything(0, workers=True)
    train = DataLoader(
        data(64, seed=1, noise=0.2),
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    val = DataLoader(data(256, seed=2, noise=0.2), batch_size=64)
    model = Memoriser()
    trainer = L.Trainer(
        max_epochs=60,
        accelerator="cpu",
        devices=1,
        deterministic=True,
        log_every_n_steps=1,
        logger=loggers,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, train, val)
    m = {
        "train_loss_step": model.train_steps,
        "train_loss_epoch": model.train_epochs,
        "val_loss": model.val_epochs,
        "optimizer_steps": trainer.global_step,
        "steps_per_epoch": len(train),
        "val_best_epoch": int(np.argmin(model.val_epochs)),
        "overfits": overfits(model.train_epochs, model.val_epochs),
        "train_loss_step_stalls_10_step_windows": stalls(model.train_steps),
    }
    return {
        "description": "The real Lightning Trainer and TensorBoardLogger: a wide net memorising "
        "64 noisy samples (batches of 16, 60 epochs, 240 steps); self.log('train_loss', "
        "on_step=True, on_epoch=True) gives train_loss_step and train_loss_epoch, "
        "self.log('val_loss') in validation_step gives val_loss at each epoch end.",
        "measured": m,
        "expected": ["Overfit", "Overtraining"] if m["overfits"] else [],
        "also": OVERFIT_ALSO,
        "quiet": ["ExplodingTensor"],
        "insufficient": NEEDS_ACTIVATIONS
        + NEEDS_LABELS
        + ["VanishingGradient", "WeightUpdateRatio"],
        "reason": f"validation loss best at epoch {m['val_best_epoch']}, then rises while the "
        f"training loss falls; {OVERFIT_WHY}",
    }


SCENARIOS = {"lightning_real_overfit": overfit, "lightning_real_mlflow_overfit": mlflow_overfit}
WRITERS = {"lightning_real_mlflow_overfit": MLFLOW_WRITER}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    labels = SCENARIOS[args.scenario](args.out)
    labels = {"writer": WRITERS.get(args.scenario, WRITER), "scenario": args.scenario, **labels}
    versions = dict(VERSIONS)
    if args.scenario in WRITERS:
        import mlflow

        versions["mlflow"] = mlflow.__version__
    write_labels(args.out, labels, versions)


if __name__ == "__main__":
    main()
