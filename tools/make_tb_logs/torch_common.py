"""Helpers of torch_runs.py: synthetic data, the models, a logged training loop and the
overfitting curves (measured while training, never read back from the log)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.tensorboard import SummaryWriter

sys.path.insert(0, str(Path(__file__).parent))
from common import first_nonfinite, overfits, stalls, unchanged  # noqa: E402

VERSIONS = {"torch": torch.__version__, "numpy": np.__version__}
WRITER = "torch.utils.tensorboard.SummaryWriter"


def data(n: int, d: int = 16, seed: int = 0, noise: float = 0.0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    teacher = torch.randn(d, 1, generator=torch.Generator().manual_seed(99))
    y = (x @ teacher > 0).float().squeeze(1)
    if noise:
        flip = torch.rand(n, generator=g) < noise
        y = torch.where(flip, 1 - y, y)
    return x, y


def mlp(depth: int = 2, width: int = 32, act: type[nn.Module] = nn.ReLU, d: int = 16) -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(d if i == 0 else width, width), act()]
    layers.append(nn.Linear(width, 1))
    return nn.Sequential(*layers)


def grad_mean_abs(model: nn.Module) -> float:
    return max(float(p.grad.abs().mean()) for p in model.parameters() if p.grad is not None)


def safe_histogram(writer: SummaryWriter, tag: str, values: torch.Tensor, step: int) -> bool:
    """torch's add_histogram raises on NaN/inf, and on finite values too large for its bucket
    edges ("The histogram is empty"): a user's loop must skip them to go on."""
    if not torch.isfinite(values).all():
        return False
    try:
        writer.add_histogram(tag, values, step)
    except ValueError:
        return False
    return True


def train_loop(
    out: Path,
    *,
    steps: int = 60,
    lr: float = 0.01,
    depth: int = 2,
    act: type[nn.Module] = nn.ReLU,
    init: Callable[[nn.Module], None] | None = None,
    hist_every: int = 10,
    opt: str = "adam",
) -> dict:
    """Full-batch training with a loss scalar each step and weight and ``.grad`` histograms
    every ``hist_every`` steps, in one folder (GLOBAL)."""
    x, y = data(256)
    model = mlp(depth, act=act)
    if init is not None:
        model.apply(init)
    optim = (torch.optim.Adam if opt == "adam" else torch.optim.SGD)(model.parameters(), lr=lr)
    writer = SummaryWriter(str(out))
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses, gmax = [], 0.0
    skipped = 0
    for step in range(steps):
        optim.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
        loss.backward()
        writer.add_scalar("loss", loss.item(), step)
        losses.append(loss.item())
        if math.isfinite(loss.item()):
            gmax = max(gmax, grad_mean_abs(model))
        if step % hist_every == 0:
            for name, p in model.named_parameters():
                ok = safe_histogram(writer, name, p.detach(), step)
                ok &= safe_histogram(writer, name + ".grad", p.grad, step)
                skipped += not ok
        optim.step()
    writer.close()
    change = [float((p.detach() - start[n]).abs().max()) for n, p in model.named_parameters()]
    return {
        "weight_change_smallest_max_abs": min(change),
        "loss_unchanged_3_steps": unchanged([losses]),
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "loss_first_nonfinite_step": first_nonfinite(list(range(steps)), losses),
        "grad_mean_abs_max_finite": gmax,
        "histograms_skipped_nonfinite": skipped,
        "loss_stalls_10_step_windows": stalls(losses),
    }


def _tiny_init(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0, 1e-3)
        nn.init.zeros_(m.bias)


def overfit_curves(epochs: int = 40) -> tuple[nn.Module, list[float], list[float], list[dict]]:
    """A wide net memorising 64 samples with 20 % flipped labels, validated on 256 others:
    training loss falls; validation loss falls, then rises. Returns per-epoch train/val
    losses and gradient norms."""
    xt, yt = data(64, seed=1, noise=0.2)
    xv, yv = data(256, seed=2, noise=0.2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 1))
    optim = torch.optim.Adam(model.parameters(), lr=0.003)
    train, val, norms = [], [], []
    for _ in range(epochs):
        optim.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(xt).squeeze(1), yt)
        loss.backward()
        norms.append({n: float(p.grad.norm()) for n, p in model.named_parameters()})
        optim.step()
        with torch.no_grad():
            v = nn.functional.binary_cross_entropy_with_logits(model(xv).squeeze(1), yv)
        train.append(loss.item())
        val.append(v.item())
    return model, train, val, norms


def _overfit_measured(train: list[float], val: list[float]) -> dict:
    best = min(range(len(val)), key=lambda i: val[i])
    return {
        "train_loss": train,
        "val_loss": val,
        "val_best_epoch": best,
        "overfits": overfits(train, val),
    }
