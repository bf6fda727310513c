"""TensorBoard runs written by PyTorch's own ``torch.utils.tensorboard.SummaryWriter``: plain
torch idioms, and the tag names and steps of Lightning's TensorBoardLogger and Hugging Face's
Trainer (written with SummaryWriter, as those loggers do). One scenario per process:
``python torch_runs.py --scenario NAME --out DIR``; labels are measured here."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.tensorboard import SummaryWriter

sys.path.insert(0, str(Path(__file__).parent))
from common import (  # noqa: E402
    EXPLODING_ALSO,
    EXPLODING_WHY,
    FLAT_ALSO,
    FLAT_WHY,
    NEEDS_ACTIVATIONS,
    NEEDS_LABELS,
    OVERFIT_ALSO,
    OVERFIT_WHY,
    STALLED_ALSO,
    VANISHING_WHY,
    first_nonfinite,
    stalls,
    unchanged,
    write_labels,
)
from torch_common import (  # noqa: E402
    VERSIONS,
    WRITER,
    _overfit_measured,
    _tiny_init,
    data,
    mlp,
    overfit_curves,
    train_loop,
)

# ---------------------------------------------------------------- scenarios

INSUFFICIENT_TORCH = NEEDS_ACTIVATIONS + NEEDS_LABELS + ["WeightUpdateRatio"]


def healthy(out: Path) -> dict:
    m = train_loop(out, lr=0.01, hist_every=20)
    return {
        "description": "MLP 16-32-32-1, Adam lr 0.01, full batch, 60 steps: loss each step, weight "
        "and .grad histograms every 20 steps, one folder (GLOBAL).",
        "measured": m,
        "expected": [],
        "quiet": [
            "LossNotDecreasing",
            "VanishingGradient",
            "ExplodingTensor",
            "Overtraining",
            "UnchangedTensor",
            "PoorWeightInitialization",
        ],
        "insufficient": INSUFFICIENT_TORCH + ["Overfit"],
        "reason": "loss falls in every 10-step window; gradients ~1e-2; no validation loss logged",
    }


def vanishing(out: Path) -> dict:
    m = train_loop(out, lr=0.01, depth=6, act=nn.Sigmoid, init=_tiny_init)
    grads = m["grad_mean_abs_max_finite"]
    return {
        "description": "6 sigmoid layers initialised N(0, 1e-3): gradients of the first layers "
        "vanish; loss each step, weight and .grad histograms every 10 steps.",
        "measured": m,
        "expected": ["VanishingGradient"]
        + (["LossNotDecreasing"] if m["loss_stalls_10_step_windows"] else []),
        "also": (STALLED_ALSO if m["loss_stalls_10_step_windows"] else [])
        + (["UnchangedTensor"] if m["loss_unchanged_3_steps"] else []),
        "quiet": ["ExplodingTensor"],
        "insufficient": INSUFFICIENT_TORCH + ["Overfit"],
        "reason": f"largest per-parameter mean |grad| {grads:.3g}; the smallest are far below "
        f"1e-7; {VANISHING_WHY}",
    }


def exploding(out: Path) -> dict:
    m = train_loop(out, lr=1e6, opt="sgd", steps=20, hist_every=1)
    assert m["loss_first_nonfinite_step"] is not None
    return {
        "description": "SGD lr 1e6: the loss turns inf/NaN; add_histogram refuses non-finite "
        "values, so the loop skips those histograms (as a user must); histograms every step.",
        "measured": m,
        "expected": ["ExplodingTensor"],
        "also": EXPLODING_ALSO,
        "quiet": ["VanishingGradient"],
        "insufficient": INSUFFICIENT_TORCH + ["Overfit"],
        "reason": f"loss non-finite from step {m['loss_first_nonfinite_step']}; {EXPLODING_WHY}",
    }


def flat(out: Path) -> dict:
    m = train_loop(out, lr=0.0, opt="sgd", hist_every=20)
    assert m["weight_change_smallest_max_abs"] == 0.0
    return {
        "description": "lr 0: the loss is the same at every step; histograms every 20 steps.",
        "measured": m,
        "expected": ["LossNotDecreasing"],
        "also": FLAT_ALSO,
        "quiet": ["ExplodingTensor", "VanishingGradient"],
        "insufficient": INSUFFICIENT_TORCH + ["Overfit"],
        "reason": f"the loss never falls; {FLAT_WHY}",
    }


def overfit_folders(out: Path) -> dict:
    model, train, val, _ = overfit_curves()
    w_train, w_val = SummaryWriter(str(out / "train")), SummaryWriter(str(out / "val"))
    for epoch, (a, b) in enumerate(zip(train, val, strict=True)):
        w_train.add_scalar("loss", a, epoch)
        w_val.add_scalar("loss", b, epoch)
    w_train.close()
    w_val.close()
    m = _overfit_measured(train, val)
    return {
        "description": "Two writers, run/train and run/val, tag 'loss' per epoch: training loss "
        "falls, validation loss falls then rises (64 noisy samples memorised).",
        "measured": m,
        "expected": ["Overfit", "Overtraining"] if m["overfits"] else [],
        "also": OVERFIT_ALSO,
        "quiet": ["ExplodingTensor"],
        "insufficient": INSUFFICIENT_TORCH + ["VanishingGradient"],
        "reason": f"validation loss best at epoch {m['val_best_epoch']}, then rises; {OVERFIT_WHY}",
    }


def tutorial(out: Path) -> dict:
    model, train, val, _ = overfit_curves()
    w = SummaryWriter(str(out))
    for epoch, (a, b) in enumerate(zip(train, val, strict=True)):
        w.add_scalar("Loss/train", a, epoch)
        w.add_scalar("Loss/test", b, epoch)
    w.close()
    m = _overfit_measured(train, val)
    return {
        "description": "The PyTorch tutorial's idiom: 'Loss/train' and 'Loss/test' in one folder.",
        "measured": m,
        "expected": ["Overfit", "Overtraining"] if m["overfits"] else [],
        "also": OVERFIT_ALSO,
        "quiet": ["ExplodingTensor"],
        "insufficient": INSUFFICIENT_TORCH + ["VanishingGradient"],
        "reason": f"validation loss best at epoch {m['val_best_epoch']}, then rises; {OVERFIT_WHY}",
    }


def add_scalars(out: Path) -> dict:
    model, train, val, _ = overfit_curves()
    w = SummaryWriter(str(out))
    for epoch, (a, b) in enumerate(zip(train, val, strict=True)):
        w.add_scalars("loss", {"train": a, "val": b}, epoch)
    w.close()
    m = _overfit_measured(train, val)
    return {
        "description": "add_scalars('loss', {'train': a, 'val': b}): sub-folders loss_train/ "
        "and loss_val/, each with the tag 'loss'.",
        "measured": m,
        "expected": ["Overfit", "Overtraining"] if m["overfits"] else [],
        "also": OVERFIT_ALSO,
        "quiet": ["ExplodingTensor"],
        "insufficient": INSUFFICIENT_TORCH + ["VanishingGradient"],
        "reason": f"validation loss best at epoch {m['val_best_epoch']}, then rises; {OVERFIT_WHY}",
    }


def lightning_overfit(out: Path) -> dict:
    """Lightning's TensorBoardLogger: lightning_logs/version_0/, tags as the module logs them
    (train_loss per step, val_loss and epoch at the step the epoch ends), the grad_norm
    utility's grad_2.0_norm/<param> and grad_2.0_norm_total, hp_metric -1 at step 0."""
    model, train, val, norms = overfit_curves()
    w = SummaryWriter(str(out / "lightning_logs" / "version_0"))
    w.add_scalar("hp_metric", -1, 0)
    for epoch, (a, b) in enumerate(zip(train, val, strict=True)):
        step = epoch  # one batch per epoch: global_step counts optimizer steps
        w.add_scalar("train_loss", a, step)
        for name, v in norms[epoch].items():
            w.add_scalar(f"grad_2.0_norm/{name}", v, step)
        w.add_scalar(
            "grad_2.0_norm_total", math.sqrt(sum(v * v for v in norms[epoch].values())), step
        )
        w.add_scalar("val_loss", b, step)
        w.add_scalar("epoch", epoch, step)
    w.close()
    m = _overfit_measured(train, val)
    m["grad_norm_min"] = min(min(n.values()) for n in norms)
    return {
        "description": "Lightning idioms: lightning_logs/version_0, train_loss, val_loss, epoch, "
        "hp_metric, grad_2.0_norm/<param> scalars; the overfitting net.",
        "measured": m,
        "expected": ["Overfit", "Overtraining"] if m["overfits"] else [],
        "also": OVERFIT_ALSO,
        "quiet": ["ExplodingTensor", "VanishingGradient"],
        "insufficient": NEEDS_ACTIVATIONS + NEEDS_LABELS + ["WeightUpdateRatio"],
        "reason": f"validation loss best at epoch {m['val_best_epoch']}, then rises; "
        f"gradient norms >= {m['grad_norm_min']:.3g}; {OVERFIT_WHY}",
    }


def lightning_vanishing(out: Path) -> dict:
    x, y = data(256)
    model = mlp(6, act=nn.Sigmoid)
    model.apply(_tiny_init)
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    w = SummaryWriter(str(out / "lightning_logs" / "version_0"))
    w.add_scalar("hp_metric", -1, 0)
    losses, smallest, history = [], math.inf, []
    for step in range(40):
        optim.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
        loss.backward()
        w.add_scalar("train_loss", loss.item(), step)
        norms = {n: float(p.grad.norm()) for n, p in model.named_parameters()}
        for name, v in norms.items():
            w.add_scalar(f"grad_2.0_norm/{name}", v, step)
        w.add_scalar("grad_2.0_norm_total", math.sqrt(sum(v * v for v in norms.values())), step)
        smallest = min(smallest, min(norms.values()))
        history.append(norms)
        losses.append(loss.item())
        optim.step()
    w.close()
    same = unchanged([losses] + [[h[n] for h in history] for n in history[0]])
    return {
        "description": "Lightning idioms on the vanishing net: train_loss and per-parameter "
        "grad_2.0_norm/<param> scalars only (no histograms).",
        "measured": {
            "grad_norm_min": smallest,
            "loss_stalls_10_step_windows": stalls(losses),
            "loss_or_grad_norm_unchanged_3_steps": same,
        },
        "expected": ["VanishingGradient"] + (["LossNotDecreasing"] if stalls(losses) else []),
        "also": (STALLED_ALSO if stalls(losses) else []) + (["UnchangedTensor"] if same else []),
        "quiet": ["ExplodingTensor"],
        "insufficient": NEEDS_ACTIVATIONS + NEEDS_LABELS + ["Overfit", "WeightUpdateRatio"],
        "reason": f"smallest gradient norm {smallest:.3g}; {VANISHING_WHY}",
    }


def hf_overfit(out: Path) -> dict:
    """Hugging Face Trainer's TensorBoardCallback: one run folder, train/loss every
    logging_steps, train/grad_norm, train/learning_rate, train/epoch, eval/loss and
    eval/runtime at each evaluation, all at the global step."""
    model, train, val, norms = overfit_curves()
    w = SummaryWriter(str(out))
    w.add_text("args", "{}", 0)
    lr = 0.01
    for epoch, (a, b) in enumerate(zip(train, val, strict=True)):
        step = epoch + 1  # the Trainer logs after the optimizer step: global_step from 1
        w.add_scalar("train/loss", a, step)
        w.add_scalar("train/grad_norm", math.sqrt(sum(v * v for v in norms[epoch].values())), step)
        w.add_scalar("train/learning_rate", lr * (1 - epoch / len(train)), step)
        w.add_scalar("train/epoch", epoch + 1, step)
        w.add_scalar("eval/loss", b, step)
        w.add_scalar("eval/runtime", 0.01, step)
        w.add_scalar("eval/samples_per_second", 25600.0, step)
    w.add_scalar("train/train_runtime", 1.0, len(train))
    w.add_scalar("train/train_loss", sum(train) / len(train), len(train))
    w.close()
    m = _overfit_measured(train, val)
    return {
        "description": "Hugging Face Trainer idioms in one folder: train/loss, eval/loss, "
        "train/grad_norm, train/learning_rate, train/epoch, eval/runtime, train/train_loss.",
        "measured": m,
        "expected": ["Overfit", "Overtraining"] if m["overfits"] else [],
        "also": OVERFIT_ALSO,
        "quiet": ["ExplodingTensor", "VanishingGradient"],
        "insufficient": NEEDS_ACTIVATIONS + NEEDS_LABELS + ["WeightUpdateRatio"],
        "reason": f"validation loss best at epoch {m['val_best_epoch']}, then rises; {OVERFIT_WHY}",
    }


def hf_exploding(out: Path) -> dict:
    x, y = data(256)
    model = mlp(2)
    optim = torch.optim.SGD(model.parameters(), lr=1e6)
    w = SummaryWriter(str(out))
    losses = []
    for step in range(1, 31):
        optim.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y)
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf")))
        w.add_scalar("train/loss", loss.item(), step)
        w.add_scalar("train/grad_norm", norm, step)
        w.add_scalar("train/learning_rate", 1e6, step)
        w.add_scalar("train/epoch", step / 30, step)
        losses.append(loss.item())
        optim.step()
    w.close()
    nf = first_nonfinite(list(range(1, 31)), losses)
    assert nf is not None
    return {
        "description": "Hugging Face Trainer idioms, SGD lr 1e6: train/loss and train/grad_norm "
        "turn inf/NaN.",
        "measured": {"loss_first_nonfinite_step": nf, "train_loss": losses},
        "expected": ["ExplodingTensor"],
        "also": EXPLODING_ALSO,
        "quiet": ["VanishingGradient"],
        "insufficient": NEEDS_ACTIVATIONS + NEEDS_LABELS + ["WeightUpdateRatio", "Overfit"],
        "reason": f"loss non-finite from step {nf}; {EXPLODING_WHY}",
    }


SCENARIOS = {
    "torch_healthy": healthy,
    "torch_vanishing": vanishing,
    "torch_exploding": exploding,
    "torch_flat": flat,
    "torch_overfit": overfit_folders,
    "torch_tutorial_overfit": tutorial,
    "torch_add_scalars_overfit": add_scalars,
    "lightning_overfit": lightning_overfit,
    "lightning_vanishing": lightning_vanishing,
    "hf_overfit": hf_overfit,
    "hf_exploding": hf_exploding,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    args.out.mkdir(parents=True, exist_ok=True)
    labels = SCENARIOS[args.scenario](args.out)
    labels = {"writer": WRITER, "scenario": args.scenario, **labels}
    write_labels(args.out, labels, VERSIONS)


if __name__ == "__main__":
    main()
