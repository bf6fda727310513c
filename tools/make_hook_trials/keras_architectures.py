"""Keras functional models with inline activations and custom GradientTape loops, written by
smdebug 1.0.34's real KerasHook.

Run inside the "tf" venv:  python keras_architectures.py --scenario functional_healthy --out DIR
(make.py runs every scenario). The model is a functional CNN whose activations all live inside
their layers, every layer auto-named by Keras: ``Conv2D(4, 3, activation="relu")`` (conv2d),
``MaxPooling2D`` (max_pooling2d), ``Flatten`` (flatten), ``Dense(16, activation="tanh")``
(dense), ``Dense(16, activation="relu")`` (dense_1), ``Dense(3)`` (dense_2), on 6x6 one-channel
images whose class is the row band of a bright bar.

* ``functional_*``: ``model.fit`` with the hook as a callback (train_step hands the gradients to
  the hook through the logs and the model runs eagerly, as in keras_trials.py).
* ``tape_*``: a custom loop, ``with hook.wrap_tape(tf.GradientTape()) as tape``, ``tape.gradient``
  and ``optimizer.apply_gradients``, no ``model.fit``: the hook saves ``loss`` (the tape's
  target), ``weights/<variable>``, ``gradients/<variable>Grad`` and, after
  ``hook.register_model``, the layers' inputs/outputs. ``wrap_tape`` sets the TRAIN mode.

The evidence is every inline activation's own input (``inputs @ kernel + bias``, a Conv2D's
``tf.nn.convolution`` + bias, from the layer's weights with TF ops on the batch being trained,
before the update; the probe model that gives the layer inputs recomputes the same values),
never read back through smdebug.
"""

import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import smdebug.tensorflow as smd  # noqa: E402
from smdebug.core.save_config import SaveConfig  # noqa: E402

SEED = 1234
N_CLASSES, IMG = 3, 6
RANGES = common.SATURATION_RANGES
COLLECTIONS = ["weights", "biases", "gradients", "losses", "metrics", "layers"]
PROBE: dict = {}


def cfg(expected, description, **kw):
    base = dict(expected=expected, description=description, lr=0.01, opt="adam", epochs=4,
                batch=16, n_train=128, n_val=32, save_interval=4, input_scale=1.0, loss="ce",
                kernel={}, bias={}, register_model=True)  # fmt: skip
    base.update(kw)
    return base


SCENARIOS = {
    "functional_healthy": cfg([], "Functional Keras CNN with inline activations, all "
                              "auto-named: Conv2D(4, 3, activation='relu') (conv2d)-MaxPooling2D-"
                              "Flatten-Dense(16, activation='tanh') (dense)-Dense(16, "
                              "activation='relu') (dense_1)-Dense(3) (dense_2); Glorot init, "
                              "Adam lr=0.01, model.fit 4 epochs of 8 batches of 16 with "
                              "validation_data: the loss falls, nothing is wrong."),
    "functional_dead_relu": cfg(["DeadRelu"], "The functional CNN with conv2d's bias -10: every "
                                "unit of its inline relu outputs 0 for every sample, so does "
                                "dense_1's (its inputs are then all 0 too); dead for good.",
                                bias={"conv2d": -10.0}),
    "functional_saturated": cfg(["SaturatedActivation"], "The functional CNN with dense's "
                                "bias 20 (kernel N(0, 0.5^2)): the inputs of its inline tanh "
                                "lie above 9.5 for every sample of nearly every unit from the "
                                "first step; tanh's derivative is ~0 there, so they stay.",
                                kernel={"dense": 0.5}, bias={"dense": 20.0}),
    "tape_healthy": cfg([], "The functional CNN trained by a custom GradientTape loop "
                        "(hook.wrap_tape, tape.gradient, Adam lr=0.01 apply_gradients; 4 "
                        "epochs of 8 batches of 16, no validation), hook.register_model for "
                        "the layer tensors: the loss falls, nothing is wrong."),
    "tape_nan": cfg(["ExplodingTensor"], "The functional CNN in a custom GradientTape loop "
                    "with every kernel N(0, 3^2), inputs x10, MSE on one-hot targets, SGD "
                    "lr=50: the loss, weights and gradients overflow to inf and NaN. No "
                    "register_model (weights, gradients and loss only).", opt="sgd", lr=50.0,
                    loss="mse", input_scale=10.0, epochs=2, register_model=False,
                    kernel={"conv2d": 3.0, "dense": 3.0, "dense_1": 3.0, "dense_2": 3.0}),
}  # fmt: skip


def images(n, rng, scale=1.0):
    """6x6x1 images: the class is the band of rows (top/middle/bottom) holding a bright bar."""
    y = rng.randint(0, N_CLASSES, size=n)
    x = 0.3 * rng.normal(size=(n, IMG, IMG, 1))
    x[np.arange(n), y * 2 + rng.randint(0, 2, size=n), :, 0] += 2.0
    return (x * scale).astype(np.float32), y.astype(np.int64)


def build(c):
    def init(name, seed):
        std = c["kernel"].get(name)
        kernel = keras.initializers.RandomNormal(0, std, seed) if std else "glorot_uniform"
        bias = keras.initializers.Constant(c["bias"].get(name, 0.0))
        return {"kernel_initializer": kernel, "bias_initializer": bias}

    inp = keras.Input(shape=(IMG, IMG, 1))
    x = layers.Conv2D(4, 3, padding="same", activation="relu", **init("conv2d", SEED))(inp)
    x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = layers.Dense(16, activation="tanh", **init("dense", SEED + 1))(x)
    x = layers.Dense(16, activation="relu", **init("dense_1", SEED + 2))(x)
    out = layers.Dense(N_CLASSES, **init("dense_2", SEED + 3))(x)
    return inp, out


def pre_activation(layer, value):
    """The layer's output before its activation, from its weights with TF ops (calling the
    layer would overwrite what the hook's layer wrapper saves)."""
    if isinstance(layer, layers.Conv2D):
        pre = tf.nn.convolution(value, layer.kernel, strides=layer.strides,
                                padding=layer.padding.upper())  # fmt: skip
    else:
        pre = tf.matmul(value, layer.kernel)
    return (pre + layer.bias).numpy()


def activation_stats(x):
    """Every inline activation's input and output on batch ``x``."""
    stats = {}
    for layer, value in zip(PROBE["act_layers"], PROBE["probe"](x, training=True)):
        kind = layer.activation.__name__
        pre = pre_activation(layer, value)
        flat = pre.reshape(len(pre), -1)
        s = {"kind": kind, "nonfinite": common.has_nonfinite(pre)}
        if kind == "relu":
            s["dead_units_pct"] = common.fnum(100.0 * np.mean(np.all(flat <= 0, axis=0)))
        else:
            lo, hi = RANGES[kind]
            inside = ((flat > lo) & (flat < hi)).mean(axis=0)
            s["inputs_outside_range_pct"] = common.outside_percent(pre, lo, hi)
            s["saturated_units_pct"] = common.fnum(100.0 * np.mean(inside < 0.01))
        stats[layer.name] = s
    return stats


def loss_fn(c):
    if c["loss"] == "mse":
        return lambda y, p: tf.reduce_mean(tf.square(tf.one_hot(y, N_CLASSES) - p))
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def record(x, loss, grads, variables):
    PROBE["records"].append({
        "loss": common.fnum(loss.numpy()),
        "activations": activation_stats(x),
        "grad_mean_abs": {v.name: common.fnum(np.mean(np.abs(g.numpy())))
                          for v, g in zip(variables, grads)},
        "nonfinite_weights": any(not np.all(np.isfinite(v.numpy())) for v in variables),
    })  # fmt: skip


class Model(keras.Model):
    """train_step hands the gradients to the hook (as keras_trials.GradModel) and records the
    evidence before the update."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        grads = tape.gradient(loss, self.trainable_variables)
        record(x, loss, grads, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        logs = {m.name: m.result() for m in self.metrics}
        logs["smdebug_gradients"] = grads
        return logs


def fit(model, hook, c, opt, data):
    (x_train, y_train), val = data
    model.compile(optimizer=opt, run_eagerly=True, metrics=["accuracy"], loss=loss_fn(c))
    hist = model.fit(x_train, y_train, batch_size=c["batch"], epochs=c["epochs"], verbose=0,
                     validation_data=val, callbacks=[hook])  # fmt: skip
    per_train, per_val = -(-c["n_train"] // c["batch"]), -(-c["n_val"] // c["batch"])
    for i, r in enumerate(PROBE["records"]):
        r["mode_step"], r["global_step"] = i, i + (i // per_train) * per_val
    h = hist.history
    return [{"epoch": e, "train_loss_keras_epoch_mean": common.fnum(h["loss"][e]),
             "val_loss": common.fnum(h["val_loss"][e])} for e in range(c["epochs"])]  # fmt: skip


def tape_loop(model, hook, c, opt, data, rng):
    (x_train, y_train), _ = data
    lf = loss_fn(c)
    epochs = []
    for epoch in range(c["epochs"]):
        perm = rng.permutation(c["n_train"])
        losses = []
        for i in range(0, c["n_train"], c["batch"]):
            xb, yb = x_train[perm[i : i + c["batch"]]], y_train[perm[i : i + c["batch"]]]
            with hook.wrap_tape(tf.GradientTape()) as tape:
                loss = lf(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            record(xb, loss, grads, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            losses.append(float(loss.numpy()))
        epochs.append({"epoch": epoch, "train_loss_mean": common.fnum(np.mean(losses))})
    for i, r in enumerate(PROBE["records"]):
        r["mode_step"] = r["global_step"] = i
    return epochs


def run(scenario, out_dir):
    c = SCENARIOS[scenario]
    common.seed_everything(SEED)
    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    rng = np.random.RandomState(SEED)
    data = (images(c["n_train"], rng, c["input_scale"]), images(c["n_val"], rng, c["input_scale"]))
    inp, out = build(c)
    tape = scenario.startswith("tape")
    model = (keras.Model if tape else Model)(inp, out)
    initial = {v.name: v.numpy().copy() for v in model.trainable_variables}
    PROBE["act_layers"] = [la for la in model.layers
                           if getattr(la, "activation", None) is not None
                           and la.activation.__name__ in ("relu", "tanh", "sigmoid")]  # fmt: skip
    # Kept off the model: an attribute would make Keras track the probe as a layer.
    PROBE["probe"] = keras.Model(inp, [la.input for la in PROBE["act_layers"]])
    PROBE["records"] = []
    opt = (keras.optimizers.Adam if c["opt"] == "adam" else keras.optimizers.SGD)(c["lr"])
    common.fresh_dir(out_dir)
    si = c["save_interval"]
    hook = smd.KerasHook(out_dir=out_dir, save_config=SaveConfig(save_interval=si),
                         include_collections=COLLECTIONS)  # fmt: skip
    hook.get_collection("losses").save_config = SaveConfig(save_interval=1)
    if c["register_model"]:
        hook.register_model(model)
    per_epoch = (
        tape_loop(model, hook, c, opt, data, rng) if tape else fit(model, hook, c, opt, data)
    )
    hook.close()

    recs = PROBE["records"]
    saved = [r for r in recs if r["mode_step"] % si == 0]
    grad_means = {}
    for name in initial:
        vals = [r["grad_mean_abs"][name] for r in recs]
        finite = [v for v in vals if isinstance(v, float)]
        grad_means[name] = {"first_step": vals[0], "last_step": vals[-1],
                            "min_finite": min(finite) if finite else None,
                            "max_finite": max(finite) if finite else None}  # fmt: skip
    changes = {v.name: common.fnum(np.max(np.abs(v.numpy() - initial[v.name])))
               for v in model.trainable_variables}  # fmt: skip
    nan_steps = [r["global_step"] for r in recs
                 if r["loss"] in ("nan", "inf", "-inf") or r["nonfinite_weights"]]  # fmt: skip
    evidence = {
        "measured_by": "the training script (each inline activation's input: the layer's "
        "matmul / convolution + bias with TF ops, on the batch being trained, before the "
        "update), not smdebug",
        "dead_relu_definition": "unit dead = output <= 0 for every sample of the batch (a "
        "conv's unit: one channel at one position)",
        "saturation_ranges": RANGES,
        "activations_first_saved_train_step": {"global_step": saved[0]["global_step"],
                                               "layers": saved[0]["activations"]},
        "activations_last_saved_train_step": {"global_step": saved[-1]["global_step"],
                                              "layers": saved[-1]["activations"]},
        "gradient_mean_abs_per_variable": grad_means,
        "initial_weight_variance": {n: common.fnum(v.var()) for n, v in initial.items()
                                    if "kernel" in n},
        "max_abs_weight_change": changes,
        "weights_changed": any(v != 0.0 for v in changes.values()),
        "nan_or_inf_seen": bool(nan_steps),
        "first_nonfinite_global_step": nan_steps[0] if nan_steps else None,
        "train_batch_loss_per_step": [r["loss"] for r in recs],
        "train_batch_loss_global_steps": [r["global_step"] for r in recs],
        "per_epoch": per_epoch,
    }  # fmt: skip
    calls = (
        [
            "with hook.wrap_tape(tf.GradientTape()) as tape: ...",
            "tape.gradient(...)",
            "opt.apply_gradients(...)",
        ]
        if tape
        else ["model.compile(..., run_eagerly=True)", "model.fit(..., callbacks=[hook])"]
    )
    if c["register_model"]:
        calls.insert(0, "hook.register_model(model)")
    labels = {
        "framework": "tensorflow2-keras" if not tape else "tensorflow2-gradienttape",
        "versions": common.versions(tensorflow=tf.__version__),
        "scenario": scenario,
        "trial": f"keras_{scenario}",
        "description": c["description"],
        "config": {k: c[k] for k in ("lr", "opt", "loss", "batch", "n_train", "n_val",
                                     "epochs", "save_interval", "input_scale")},
        "hook": {"class": "smdebug.tensorflow.KerasHook", "include_collections": COLLECTIONS,
                 "save_config": {"save_interval": si, "losses_collection_save_interval": 1},
                 "calls": calls + ["hook.close()"]},
        "expected": c["expected"],
        "evidence": evidence,
    }  # fmt: skip
    labels["also_supported_by_evidence"] = common.side_effects(evidence, c["expected"])
    common.write_labels(out_dir, labels)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
