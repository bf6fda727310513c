"""Keras idioms the rules must read right, written by smdebug 1.0.34's real KerasHook.

Run inside the "tf" venv:  python keras_idioms.py --scenario dense_tanh --out DIR
(make.py runs every scenario). Same hook set-up as keras_trials.py (gradients through the
logs, layer values through register_model + run_eagerly). The evidence is measured inside
train_step on the batch being trained, never read back through smdebug.

* ``dense_tanh``: ``Dense(units, activation="tanh")`` layers, whose saved ``inputs`` are the
  layer's input, not tanh's. ``squash`` is fed the large outputs (|x| ~ 100) of a linear
  ``wide`` layer through a tiny kernel: its tanh inputs ``x @ kernel + bias`` are moderate.
  ``hot`` is fed ``squash``'s outputs (|x| < 1) with a bias of 20: its tanh inputs are all
  saturated. Only ``hot`` is a fault.
* ``sigmoid_flat``: 6 ``Dense(16, activation="sigmoid")`` layers, SGD lr=1e-5: the loss
  (Keras' running mean over the epoch, as the hook saves it) never falls.
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
N_FEATURES, N_CLASSES = 8, 3
RANGES = common.SATURATION_RANGES
COLLECTIONS = ["weights", "biases", "gradients", "losses", "metrics", "layers"]
SAVE_INTERVAL, BATCH, N_TRAIN, N_VAL, EPOCHS = 4, 16, 192, 32, 4
PROBE: dict = {}

SCENARIOS = {
    "dense_tanh": dict(lr=0.001, expected=["SaturatedActivation"], description="Dense layers "
                       "with activation='tanh': squash gets the large outputs (|x| ~ 100) of a "
                       "linear Dense wide through a kernel N(0, 0.001^2), so its tanh inputs are "
                       "moderate; hot gets squash's outputs (|x| < 1) with bias 20, so its tanh "
                       "inputs are all saturated. Adam lr=0.001."),
    "sigmoid_flat": dict(lr=1e-5, expected=["LossNotDecreasing"], description="6 Dense(16, "
                         "activation='sigmoid') layers, SGD lr=1e-5 on mini-batches of 16: the "
                         "loss (the running mean the hook saves) never falls."),
}  # fmt: skip


def build(scenario):
    init = keras.initializers
    inp = keras.Input(shape=(N_FEATURES,), name="features")
    if scenario == "dense_tanh":
        x = layers.Dense(16, name="wide", kernel_initializer=init.RandomNormal(0, 30, SEED))(inp)
        x = layers.Dense(
            8,
            activation="tanh",
            name="squash",
            kernel_initializer=init.RandomNormal(0, 0.001, SEED + 1),
        )(x)
        x = layers.Dense(
            8,
            activation="tanh",
            name="hot",
            bias_initializer=init.Constant(20.0),
            kernel_initializer=init.RandomNormal(0, 0.5, SEED + 2),
        )(x)
    else:
        x = inp
        for i in range(6):
            x = layers.Dense(
                16,
                activation="sigmoid",
                name=f"sig{i}",
                kernel_initializer=init.GlorotUniform(SEED + i),
            )(x)
    out = layers.Dense(N_CLASSES, name="logits")(x)  # fmt: skip
    return inp, out


class Model(keras.Model):
    """train_step hands gradients to the hook (as keras_trials.GradModel) and measures each
    Dense activation's input, ``inputs @ kernel + bias``, before the update."""

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        grads = tape.gradient(loss, self.trainable_variables)
        stats = {}
        dense, probe = PROBE["dense"], PROBE["probe"]
        for layer, value in zip(dense, probe(x, training=True)):
            kind = layer.activation.__name__
            if kind in RANGES:
                pre = value.numpy() @ layer.kernel.numpy() + layer.bias.numpy()
                lo, hi = RANGES[kind]
                inside = ((pre > lo) & (pre < hi)).mean(axis=0)
                stats[layer.name] = {
                    "kind": kind,
                    "inputs_outside_range_pct": common.outside_percent(pre, lo, hi),
                    "saturated_units_pct": common.fnum(100.0 * np.mean(inside < 0.01)),
                    "saved_inputs_outside_range_pct": common.outside_percent(value.numpy(), lo, hi),
                }
        PROBE["records"].append({"loss": common.fnum(loss.numpy()), "activations": stats})
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        logs = {m.name: m.result() for m in self.metrics}
        logs["smdebug_gradients"] = grads
        return logs


def run(scenario, out_dir):
    cfg = SCENARIOS[scenario]
    common.seed_everything(SEED)
    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    rng = np.random.RandomState(SEED)
    x_train, y_train = common.teacher_data(N_TRAIN, rng, N_FEATURES, N_CLASSES)
    x_val, y_val = common.teacher_data(N_VAL, rng, N_FEATURES, N_CLASSES)
    inp, out = build(scenario)
    model = Model(inp, out)
    # Kept off the model: an attribute would make Keras track the probe as a layer.
    PROBE["dense"] = [la for la in model.layers if isinstance(la, layers.Dense)]
    PROBE["probe"] = keras.Model(inp, [la.input for la in PROBE["dense"]])
    PROBE["records"] = []
    opt = (keras.optimizers.Adam if scenario == "dense_tanh" else keras.optimizers.SGD)(
        learning_rate=cfg["lr"]
    )
    common.fresh_dir(out_dir)
    hook = smd.KerasHook(out_dir=out_dir, save_config=SaveConfig(save_interval=SAVE_INTERVAL),
                         include_collections=COLLECTIONS)  # fmt: skip
    hook.get_collection("losses").save_config = SaveConfig(save_interval=1)
    hook.register_model(model)
    model.compile(optimizer=opt, run_eagerly=True, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))  # fmt: skip
    hist = model.fit(x_train, y_train, batch_size=BATCH, epochs=EPOCHS, verbose=0,
                     validation_data=(x_val, y_val), callbacks=[hook])  # fmt: skip
    hook.close()

    per_epoch_train, per_epoch_val = -(-N_TRAIN // BATCH), -(-N_VAL // BATCH)
    recs = PROBE["records"]
    for i, r in enumerate(recs):
        r["mode_step"] = i
        r["global_step"] = i + (i // per_epoch_train) * per_epoch_val
    saved = [r for r in recs if r["mode_step"] % SAVE_INTERVAL == 0]
    h = hist.history
    evidence = {
        "measured_by": "the training script (inside train_step: inputs @ kernel + bias of "
        "each Dense with an activation, on the batch being trained), not smdebug",
        "saturation_ranges": RANGES,
        "activations_first_saved_train_step": {"global_step": saved[0]["global_step"],
                                               "layers": saved[0]["activations"]},
        "activations_last_saved_train_step": {"global_step": saved[-1]["global_step"],
                                              "layers": saved[-1]["activations"]},
        "nan_or_inf_seen": False,
        "train_batch_loss_per_step": [r["loss"] for r in recs],
        "train_batch_loss_global_steps": [r["global_step"] for r in recs],
        "per_epoch": [{"epoch": e, "train_loss_keras_epoch_mean": common.fnum(h["loss"][e]),
                       "val_loss": common.fnum(h["val_loss"][e])} for e in range(EPOCHS)],
    }  # fmt: skip
    labels = {
        "framework": "tensorflow2-keras",
        "versions": common.versions(tensorflow=tf.__version__),
        "scenario": scenario,
        "trial": f"keras_{scenario}",
        "description": cfg["description"],
        "config": {"lr": cfg["lr"], "batch": BATCH, "n_train": N_TRAIN, "n_val": N_VAL,
                   "epochs": EPOCHS, "save_interval": SAVE_INTERVAL},
        "hook": {"class": "smdebug.tensorflow.KerasHook", "include_collections": COLLECTIONS,
                 "save_config": {"save_interval": SAVE_INTERVAL,
                                 "losses_collection_save_interval": 1},
                 "calls": ["hook.register_model(model)",
                           "model.compile(..., run_eagerly=True)", "hook.close()"]},
        "expected": cfg["expected"],
        "evidence": evidence,
    }  # fmt: skip
    common.write_labels(out_dir, labels)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
