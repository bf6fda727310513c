"""TensorBoard runs written by TensorFlow: Keras 3's ``keras.callbacks.TensorBoard`` and plain
``tf.summary`` in a custom ``GradientTape`` loop. One scenario per process:
``python tf_runs.py --scenario NAME --out DIR``; labels are measured here."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

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
    overfits,
    stalls,
    unchanged,
    write_labels,
)

VERSIONS = {"tensorflow": tf.__version__, "keras": keras.__version__, "numpy": np.__version__}


def data(n: int, d: int = 16, seed: int = 0, noise: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype("float32")
    teacher = np.random.default_rng(99).normal(size=(d,))
    y = (x @ teacher > 0).astype("float32")
    if noise:
        flip = rng.random(n) < noise
        y = np.where(flip, 1 - y, y).astype("float32")
    return x, y


def model(
    width: int = 32, depth: int = 2, act: str = "relu", init: object = "glorot_uniform"
) -> keras.Model:
    keras.utils.set_random_seed(0)
    layers = [keras.Input((16,))]
    layers += [
        keras.layers.Dense(width, activation=act, kernel_initializer=init) for _ in range(depth)
    ]
    layers.append(keras.layers.Dense(1, kernel_initializer=init))
    return keras.Sequential(layers)


class LossLog(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.train: list[float] = []
        self.val: list[float] = []
        self.batch: list[float] = []

    def on_train_batch_end(self, batch, logs=None):  # noqa: ANN001
        self.batch.append(float(logs["loss"]))

    def on_epoch_end(self, epoch, logs=None):  # noqa: ANN001
        self.train.append(float(logs["loss"]))
        if "val_loss" in logs:
            self.val.append(float(logs["val_loss"]))


def fit(
    out: Path,
    m: keras.Model,
    x,
    y,
    *,
    epochs: int,
    lr: float,
    val=None,
    update_freq="epoch",
    batch=64,
    opt="adam",
) -> LossLog:  # noqa: ANN001
    optimizer = keras.optimizers.Adam(lr) if opt == "adam" else keras.optimizers.SGD(lr)
    m.compile(
        optimizer=optimizer,
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    record = LossLog()
    tb = keras.callbacks.TensorBoard(
        str(out), histogram_freq=1, update_freq=update_freq, write_graph=False
    )
    m.fit(
        x,
        y,
        epochs=epochs,
        batch_size=batch,
        validation_data=val,
        callbacks=[record, tb],
        verbose=0,
        shuffle=False,
    )
    return record


KERAS_INSUFFICIENT = NEEDS_ACTIVATIONS + NEEDS_LABELS + ["VanishingGradient", "WeightUpdateRatio"]


def keras_healthy(out: Path) -> dict:
    x, y = data(2048, noise=0.1)
    rec = fit(out, model(), x, y, epochs=8, lr=0.003, val=data(512, seed=5, noise=0.1), batch=128)
    return {
        "description": "Keras 3 TensorBoard(histogram_freq=1, update_freq='epoch'): train/ and "
        "validation/ with epoch_loss, epoch_accuracy, evaluation_*_vs_iterations, weight "
        "histograms; 8 epochs of a small MLP learning 2048 samples (10 % flipped labels).",
        "measured": {
            "train_loss": rec.train,
            "val_loss": rec.val,
            "overfits": overfits(rec.train, rec.val),
        },
        "expected": [],
        "quiet": ["LossNotDecreasing", "Overfit", "Overtraining", "ExplodingTensor"],
        "insufficient": KERAS_INSUFFICIENT,
        "reason": "training and validation loss fall together; Keras logs no gradients",
    }


def keras_overfit(out: Path) -> dict:
    x, y = data(64, seed=1, noise=0.2)
    rec = fit(
        out,
        model(width=256, depth=1),
        x,
        y,
        epochs=40,
        lr=0.003,
        val=data(256, seed=2, noise=0.2),
        batch=64,
    )
    of = overfits(rec.train, rec.val)
    assert of, (rec.train, rec.val)
    return {
        "description": "Keras 3 TensorBoard callback on a wide net memorising 64 samples (20 % "
        "flipped labels), 40 epochs: "
        "epoch_loss falls in train/, rises in validation/ after its best epoch.",
        "measured": {"train_loss": rec.train, "val_loss": rec.val, "overfits": of},
        "expected": ["Overfit", "Overtraining"],
        "also": OVERFIT_ALSO,
        "quiet": ["ExplodingTensor"],
        "insufficient": KERAS_INSUFFICIENT,
        "reason": f"validation loss rises after its best epoch while training loss falls; {OVERFIT_WHY}",
    }


def keras_batch_flat(out: Path) -> dict:
    x, y = data(512)
    rec = fit(out, model(), x, y, epochs=3, lr=0.0, update_freq="batch", batch=16, opt="sgd")
    return {
        "description": "Keras 3 TensorBoard(update_freq='batch'), lr 0: batch_loss every batch "
        "(the running mean within its epoch) and epoch_loss stay flat; no validation.",
        "measured": {"batch_loss": rec.batch, "stalls": stalls(rec.batch)},
        "expected": ["LossNotDecreasing"],
        "also": FLAT_ALSO,
        "quiet": ["ExplodingTensor"],
        "insufficient": KERAS_INSUFFICIENT + ["Overfit"],
        "reason": f"lr 0: the weights never change; {FLAT_WHY}",
    }


def keras_exploding(out: Path) -> dict:
    x, y = data(512)
    x = x * 100
    rec = fit(out, model(), x, y, epochs=6, lr=1e4, opt="sgd", val=data(256, seed=5))
    nf = first_nonfinite(list(range(len(rec.train))), rec.train)
    assert nf is not None, rec.train
    return {
        "description": "Keras 3 TensorBoard callback, SGD lr 1e4 on inputs x100: epoch_loss turns "
        "NaN; the weight histograms hold NaN.",
        "measured": {"train_loss": rec.train, "first_nonfinite_epoch": nf},
        "expected": ["ExplodingTensor"],
        "also": EXPLODING_ALSO,
        "quiet": [],
        "insufficient": NEEDS_ACTIVATIONS
        + NEEDS_LABELS
        + ["VanishingGradient", "WeightUpdateRatio"],
        "reason": f"loss non-finite from epoch {nf}; {EXPLODING_WHY}",
    }


def tape_loop(
    out: Path,
    *,
    depth: int = 2,
    act: str = "relu",
    init: object = "glorot_uniform",
    lr: float = 0.01,
    steps: int = 60,
    opt: str = "adam",
    x_scale: float = 1.0,
) -> dict:
    """A custom GradientTape loop logging with tf.summary: loss each step, gradient norms
    (``grad_norm/<var>``) each step, weight and gradient histograms every 10 steps."""
    x, y = data(256)
    x = x * x_scale
    m = model(depth=depth, act=act, init=init)
    optimizer = keras.optimizers.Adam(lr) if opt == "adam" else keras.optimizers.SGD(lr)
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
    writer = tf.summary.create_file_writer(str(out))
    start = [v.numpy().copy() for v in m.trainable_variables]
    losses, gmax, gmin, norms = [], 0.0, math.inf, {}
    with writer.as_default():
        for step in range(steps):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, tf.squeeze(m(x, training=True), 1))
            grads = tape.gradient(loss, m.trainable_variables)
            tf.summary.scalar("loss", loss, step=step)
            for v, g in zip(m.trainable_variables, grads, strict=True):
                tf.summary.scalar(f"grad_norm/{v.path}", tf.norm(g), step=step)
                norms.setdefault(v.path, []).append(float(tf.norm(g)))
                if step % 10 == 0:
                    tf.summary.histogram(v.path, v, step=step)
                    tf.summary.histogram(f"gradients/{v.path}", g, step=step)
                mean_abs = float(tf.reduce_mean(tf.abs(g)))
                if math.isfinite(mean_abs):
                    gmax, gmin = max(gmax, mean_abs), min(gmin, mean_abs)
            losses.append(float(loss))
            optimizer.apply_gradients(zip(grads, m.trainable_variables, strict=True))
    writer.close()
    change = [
        float(np.max(np.abs(v.numpy() - s)))
        for v, s in zip(m.trainable_variables, start, strict=True)
    ]
    return {
        "weight_change_smallest_max_abs": min(change),
        "loss_or_grad_norm_unchanged_3_steps": unchanged([losses, *norms.values()]),
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "loss_first_nonfinite_step": first_nonfinite(list(range(steps)), losses),
        "grad_mean_abs_max_finite": gmax,
        "grad_mean_abs_min_finite": gmin,
        "loss_stalls_10_step_windows": stalls(losses),
    }


TF_INSUFFICIENT = NEEDS_ACTIVATIONS + NEEDS_LABELS + ["WeightUpdateRatio", "Overfit"]


def tf_healthy(out: Path) -> dict:
    m = tape_loop(out)
    return {
        "description": "tf.summary in a GradientTape loop: loss, grad_norm/<var> scalars each step, "
        "weight and gradients/<var> histograms every 10 steps; a small MLP that learns.",
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
        "insufficient": TF_INSUFFICIENT,
        "reason": "loss falls in every 10-step window; gradients ~1e-2",
    }


def tf_vanishing(out: Path) -> dict:
    init = keras.initializers.RandomNormal(0.0, 1e-3, seed=0)
    m = tape_loop(out, depth=6, act="sigmoid", init=init)
    return {
        "description": "tf.summary GradientTape loop, 6 sigmoid layers initialised N(0, 1e-3): "
        "gradient norms and histograms of the first layers vanish.",
        "measured": m,
        "expected": ["VanishingGradient"]
        + (["LossNotDecreasing"] if m["loss_stalls_10_step_windows"] else []),
        "also": (STALLED_ALSO if m["loss_stalls_10_step_windows"] else [])
        + (["UnchangedTensor"] if m["loss_or_grad_norm_unchanged_3_steps"] else []),
        "quiet": ["ExplodingTensor"],
        "insufficient": TF_INSUFFICIENT,
        "reason": f"smallest per-variable mean |grad| {m['grad_mean_abs_min_finite']:.3g}; {VANISHING_WHY}",
    }


def tf_exploding(out: Path) -> dict:
    m = tape_loop(out, lr=1e6, opt="sgd", steps=40, x_scale=10.0)
    assert m["loss_first_nonfinite_step"] is not None, m
    return {
        "description": "tf.summary GradientTape loop, SGD lr 1e6: loss and gradient norms turn "
        "inf/NaN (tf.summary.histogram writes NaN buckets without complaint).",
        "measured": m,
        "expected": ["ExplodingTensor"],
        "also": EXPLODING_ALSO,
        "quiet": ["VanishingGradient"],
        "insufficient": TF_INSUFFICIENT,
        "reason": f"loss non-finite from step {m['loss_first_nonfinite_step']}; {EXPLODING_WHY}",
    }


SCENARIOS = {
    "keras_healthy": (keras_healthy, "keras.callbacks.TensorBoard"),
    "keras_overfit": (keras_overfit, "keras.callbacks.TensorBoard"),
    "keras_batch_flat": (keras_batch_flat, "keras.callbacks.TensorBoard"),
    "keras_exploding": (keras_exploding, "keras.callbacks.TensorBoard"),
    "tf_healthy": (tf_healthy, "tf.summary"),
    "tf_vanishing": (tf_vanishing, "tf.summary"),
    "tf_exploding": (tf_exploding, "tf.summary"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fn, writer = SCENARIOS[args.scenario]
    labels = {"writer": writer, "scenario": args.scenario, **fn(args.out)}
    write_labels(args.out, labels, VERSIONS)


if __name__ == "__main__":
    main()
