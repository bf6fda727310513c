"""Small models trained for real with numpy, their debug output written in smdebug's format.

A multilayer perceptron with a chosen activation, depth, initialisation, learning rate and
data set is trained by plain gradient descent; at every step the hook below saves what the
smdebug hooks save (weights, biases, gradients, activation inputs/outputs, losses, labels,
predictions, inputs) through ``evaluator.testing.TrialWriter``, with TRAIN steps and periodic
EVAL steps. Each scenario provokes one fault the built-in rules are meant to catch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evaluator.formats import Collection, ReductionConfig
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter, compute_reductions

__all__ = ["ONSET_FILE", "SCENARIOS", "Scenario", "train"]

# Written beside the trial by ``train``: the first global step at which each fault is measurable,
# measured by the training code on its own numbers, independently of any rule (bench/detection.py).
ONSET_FILE = "fault_onsets.json"

ACTIVATIONS = {
    "relu": (lambda z: np.maximum(z, 0.0), lambda z, a: (z > 0).astype(z.dtype)),
    "sigmoid": (lambda z: 1.0 / (1.0 + np.exp(-z)), lambda z, a: a * (1.0 - a)),
    "tanh": (np.tanh, lambda z, a: 1.0 - a * a),
}


@dataclass(frozen=True)
class Scenario:
    """How to train: the fault is in the numbers."""

    name: str
    activation: str = "relu"
    hidden: tuple[int, ...] = (16, 16)
    lr: float = 0.5
    steps: int = 40
    train_samples: int = 256
    eval_every: int = 5
    init_scale: float = 1.0  # times He/Xavier scale
    hidden_bias: float = 0.0
    class_weights: tuple[float, ...] = (0.5, 0.5)
    label_noise: float = 0.0
    inputs_normalized: bool = True
    input_scale: float = 1.0  # raw, unscaled features
    batch_size: int = 128  # minibatches: inputs and labels change from step to step
    predictions_from: int = 10  # labels/predictions saved from this training step on
    seed: int = 7
    notes: str = ""
    extra: dict[str, float] = field(default_factory=dict)


SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            "healthy",
            train_samples=2048,
            notes="2 ReLU layers, 2048 samples, sensible init and learning rate",
        ),
        Scenario(
            "vanishing_gradients",
            activation="sigmoid",
            hidden=(32,) * 10,
            lr=0.1,
            init_scale=0.5,
            notes="10 sigmoid layers with small weights",
        ),
        Scenario(
            "exploding",
            hidden=(32,) * 6,
            lr=50.0,
            init_scale=4.0,
            notes="6 ReLU layers, 4x He weights, learning rate 50: values reach inf/NaN",
        ),
        Scenario("dead_relu", hidden_bias=-20.0, notes="ReLU layers with a -20 bias"),
        Scenario(
            "saturated_tanh",
            activation="tanh",
            input_scale=100.0,
            init_scale=10.0,
            lr=0.05,
            notes="tanh layers fed unscaled inputs (x100) through 10x Xavier weights",
        ),
        Scenario("lr_zero", lr=0.0, notes="learning rate 0: nothing changes"),
        Scenario(
            "overfit",
            hidden=(128, 128),
            train_samples=12,
            steps=150,
            lr=0.3,
            label_noise=0.3,
            eval_every=3,
            notes="12 noisy training samples, a large network, long training",
        ),
        Scenario("imbalanced", class_weights=(0.97, 0.03), notes="97% of the labels are class 0"),
    )
}

_GRAD_REDUCTIONS = ("mean", "abs_mean", "max", "min", "l2")


def _data(
    s: Scenario, rng: np.random.Generator, n: int, centers: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    classes = len(s.class_weights)
    y = rng.choice(classes, size=n, p=np.array(s.class_weights) / sum(s.class_weights))
    x = centers[y] + rng.normal(0, 0.9, size=(n, 8))
    if s.label_noise:
        flip = rng.random(n) < s.label_noise
        y = np.where(flip, rng.integers(0, classes, n), y)
    if not s.inputs_normalized:
        x = (x - x.min()) / (x.max() - x.min())
    return (x * s.input_scale).astype(np.float32), y


class _MLP:
    def __init__(self, s: Scenario, rng: np.random.Generator, n_in: int, n_out: int) -> None:
        sizes = (n_in, *s.hidden, n_out)
        self.act, self.dact = ACTIVATIONS[s.activation]
        gain = np.sqrt(2.0) if s.activation == "relu" else 1.0
        self.w = [
            (rng.normal(0, gain * s.init_scale / np.sqrt(a), (a, b))).astype(np.float32)
            for a, b in zip(sizes[:-1], sizes[1:])
        ]
        self.b = [
            np.full(b, s.hidden_bias if i < len(sizes) - 2 else 0.0, np.float32)
            for i, b in enumerate(sizes[1:])
        ]

    def forward(self, x: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
        inputs, outputs, a = [], [x], x
        with np.errstate(all="ignore"):
            for i, (w, b) in enumerate(zip(self.w, self.b)):
                z = a @ w + b
                inputs.append(z)
                a = self.act(z) if i < len(self.w) - 1 else z
                outputs.append(a)
        return inputs, outputs, a

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, list, list, tuple]:
        inputs, outputs, logits = self.forward(x)
        with np.errstate(all="ignore"):
            shifted = logits - logits.max(axis=1, keepdims=True)
            p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
            loss = float(-np.mean(np.log(p[np.arange(len(y)), y] + 1e-12)))
            delta = p.copy()
            delta[np.arange(len(y)), y] -= 1.0
            delta /= len(y)
            gw, gb = [None] * len(self.w), [None] * len(self.w)
            for i in reversed(range(len(self.w))):
                gw[i] = outputs[i].T @ delta
                gb[i] = delta.sum(axis=0)
                if i:
                    delta = (delta @ self.w[i].T) * self.dact(inputs[i - 1], outputs[i])
        return loss, gw, gb, (inputs, outputs, p)


def _collections(s: Scenario) -> list[Collection]:
    return [
        Collection("weights", include_regex=["^weights/"]),
        Collection("biases", include_regex=["^biases/"]),
        Collection(
            "gradients",
            include_regex=["^gradients/"],
            reduction_config=ReductionConfig(
                reductions=["mean", "max", "min"], abs_reductions=["mean"], norms=["l2"]
            ),
        ),
        Collection("losses", include_regex=["loss"]),
        Collection("relu_output", include_regex=[".*relu_output"]),
        Collection(f"{s.activation}_input", include_regex=[f".*{s.activation}_input"]),
        Collection("labels", include_regex=["^labels"]),
        Collection("predictions", include_regex=["^predictions"]),
        Collection("inputs", include_regex=["^inputs"]),
    ]


def train(s: Scenario, root: Path) -> Path:
    """Train ``s`` and write its debug output under ``root``; the trial folder."""
    rng = np.random.default_rng(s.seed)
    centers = rng.normal(0, 2.0, size=(len(s.class_weights), 8))  # one distribution for both sets
    x_train, y_train = _data(s, rng, s.train_samples, centers)
    x_eval, y_eval = _data(s, rng, 256, centers)
    model = _MLP(s, rng, x_train.shape[1], len(s.class_weights))
    writer = TrialWriter(root)
    writer.write_collections(_collections(s))
    onsets = _Onsets()
    step = train_step = eval_step = 0
    for _ in range(s.steps):
        batch = rng.choice(len(x_train), size=min(s.batch_size, len(x_train)), replace=False)
        xb, yb = x_train[batch], y_train[batch]
        loss, gw, gb, (inputs, outputs, probs) = model.loss_and_grads(xb, yb)
        tensors = _tensors(s, model, gw, gb, inputs, outputs, probs, loss, xb, yb)
        full_loss, *_ = model.loss_and_grads(x_train, y_train)
        onsets.train_step(s, step, tensors, gw, full_loss, train_step >= s.predictions_from)
        if train_step < s.predictions_from:  # a hook save_config starting later
            for name in ("labels", "predictions"):
                tensors.pop(name)
        writer.write_step(
            step,
            tensors,
            mode=ModeKeys.TRAIN,
            mode_step=train_step,
            reductions={
                f"gradients/layer{i}_weight": compute_reductions(g, _GRAD_REDUCTIONS)
                for i, g in enumerate(gw)
            },
        )
        with np.errstate(all="ignore"):
            for i in range(len(model.w)):
                model.w[i] = (model.w[i] - s.lr * gw[i]).astype(np.float32)
                model.b[i] = (model.b[i] - s.lr * gb[i]).astype(np.float32)
        step, train_step = step + 1, train_step + 1
        if train_step % s.eval_every == 0:
            eval_loss, *_ = model.loss_and_grads(x_eval, y_eval)
            onsets.eval_step(step, eval_loss)
            writer.write_step(
                step, {"loss": np.float32(eval_loss)}, mode=ModeKeys.EVAL, mode_step=eval_step
            )
            step, eval_step = step + 1, eval_step + 1
    writer.end_training()
    (root / ONSET_FILE).write_text(json.dumps(onsets.result(), indent=1, sort_keys=True))
    return root


REAL_FALL = 0.001  # a fall of the noise-free loss by more than 0.1 % of its lowest value so far


class _Onsets:
    """The first global step at which each fault is measurable, from the training code's own
    numbers (never a rule's): gradients, activations, weights, and the loss over the WHOLE
    training set and the eval set (noise-free, unlike the minibatch loss the hook saves)."""

    def __init__(self) -> None:
        self.first: dict[str, int] = {}
        self.previous_weights: list[np.ndarray] | None = None
        self.train_low: tuple[float, int] | None = None  # (lowest full loss, its step)
        self.eval_low: tuple[float, int] | None = None

    def _mark(self, fault: str, step: int, measured: bool) -> None:
        if measured and fault not in self.first:
            self.first[fault] = step

    def train_step(
        self, s: Scenario, step: int, tensors: dict, gw: list, full_loss: float, labels: bool
    ) -> None:
        with np.errstate(all="ignore"):
            finite = all(np.all(np.isfinite(np.asarray(v, dtype=float))) for v in tensors.values())
            self._mark("nonfinite", step, not finite)
            self._mark(
                "vanishing_gradient",
                step,
                any(float(np.mean(np.abs(g))) < 1e-7 for g in gw[:-1]),
            )
            for name, value in tensors.items():
                if name.endswith("_relu_output"):
                    dead = np.mean(np.all(value <= 0, axis=0)) * 100
                    self._mark("dead_relu_over_50pct", step, dead > 50)
                    self._mark("relu_output_all_zero", step, bool(np.all(value == 0)))
                if name.endswith(("tanh_input", "sigmoid_input")):
                    bound = 9.5 if "tanh" in name else 17.0
                    outside = np.mean(np.abs(value) > bound) * 100
                    self._mark("saturated_over_50pct", step, outside > 50)
            weights = [tensors[k] for k in sorted(tensors) if k.startswith("weights/")]
            if self.previous_weights is not None:
                same = all(np.array_equal(a, b) for a, b in zip(weights, self.previous_weights))
                self._mark("weights_unchanged", step, same)
            self.previous_weights = [np.array(w) for w in weights]
        self._mark("labels_saved", step, labels)
        self.train_low = _lower(self.train_low, full_loss, step)

    def eval_step(self, step: int, loss: float) -> None:
        self.eval_low = _lower(self.eval_low, loss, step)

    def result(self) -> dict[str, object]:
        out: dict[str, object] = dict(self.first)
        # The step after which the noise-free loss never really fell again.
        out["train_loss_last_real_fall"] = self.train_low[1] if self.train_low else None
        out["eval_loss_last_real_fall"] = self.eval_low[1] if self.eval_low else None
        return out


def _lower(low: tuple[float, int] | None, value: float, step: int) -> tuple[float, int]:
    """The lowest value so far and its step, moved only by a real fall (``REAL_FALL``)."""
    if low is None or not np.isfinite(low[0]):
        return (value, step)
    if np.isfinite(value) and value < low[0] - abs(low[0]) * REAL_FALL:
        return (value, step)
    return low


def _tensors(
    s: Scenario,
    model: _MLP,
    gw: list,
    gb: list,
    inputs: list,
    outputs: list,
    probs: np.ndarray,
    loss: float,
    x: np.ndarray,
    y: np.ndarray,
) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"loss": np.float32(loss)}
    for i, (w, b, g) in enumerate(zip(model.w, model.b, gw)):
        out[f"weights/layer{i}_weight"] = w
        out[f"biases/layer{i}_bias"] = b
        out[f"gradients/layer{i}_weight"] = g.astype(np.float32)
    for i, (z, a) in enumerate(zip(inputs[:-1], outputs[1:-1])):
        out[f"layer{i}_{s.activation}_input"] = z.astype(np.float32)
        if s.activation == "relu":
            out[f"layer{i}_relu_output"] = a.astype(np.float32)
    out["labels"] = y.astype(np.int64)
    out["predictions"] = probs.argmax(axis=1).astype(np.int64)
    out["inputs"] = x
    return out
