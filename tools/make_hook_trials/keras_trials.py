"""TensorFlow 2 Keras (model.fit) trials written by smdebug 1.0.34's real KerasHook.

Run inside the "tf" venv:  python keras_trials.py --scenario healthy --out DIR
(the models and scenarios are in keras_scenarios.py; this script trains and measures)

Vanilla TensorFlow does not hand gradients to the hook (AWS's own TF build did).  As on AWS's
build, the model's train_step returns them in the logs under the key "smdebug_gradients", and the
labels / predictions under "smdebug_y" / "smdebug_y_pred" (smdebug.tensorflow.constants /
utils.ModelOutput); KerasHook.save_smdebug_logs() writes them.  Layer inputs/outputs come from
hook.register_model(model) (the hook's own layer wrapper), which only yields values when the model
runs eagerly, hence compile(run_eagerly=True).  The evidence in labels.json is measured here,
inside train_step, never read back through smdebug.
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
from keras_scenarios import (  # noqa: E402
    EXPECTED,
    N_CLASSES,
    N_FEATURES,
    SCENARIOS,
    SEED,
    build_model,
)
from smdebug.core.save_config import SaveConfig  # noqa: E402

TANH_RANGE = (-9.5, 9.5)
SIGMOID_RANGE = (-23.0, 17.0)
LOSS_SAVE_INTERVAL = 1
INCLUDE_COLLECTIONS = [
    "weights",
    "biases",
    "gradients",
    "losses",
    "metrics",
    "sm_metrics",
    "inputs",
    "outputs",
    "layers",
]


class GradModel(keras.Model):
    """Functional model whose train_step hands gradients, labels and predictions to the hook."""

    probe = None  # keras.Model returning every activation layer's input and output
    records = None

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        grads = tape.gradient(loss, self.trainable_variables)
        # evidence, measured directly (before the update, on the same batch and weights)
        acts = self.probe(x, training=True)
        self.records.append(
            {
                "loss": common.fnum(loss.numpy()),
                "grad_mean_abs": {
                    v.name: common.fnum(np.mean(np.abs(g.numpy())))
                    for v, g in zip(self.trainable_variables, grads)
                },
                "activations": activation_stats(self.probe_specs, [a.numpy() for a in acts]),
                "nonfinite_weights": any(
                    not np.all(np.isfinite(v.numpy())) for v in self.trainable_variables
                ),
            }
        )
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        logs = {m.name: m.result() for m in self.metrics}
        logs["smdebug_gradients"] = grads
        logs["smdebug_y"] = y
        logs["smdebug_y_pred"] = y_pred
        return logs


def activation_stats(specs, values):
    out = {}
    for (name, kind), (inp, outp) in zip(specs, zip(values[0::2], values[1::2])):
        s = {"kind": kind, "nonfinite": common.has_nonfinite(inp, outp)}
        if kind == "relu":
            s["dead_units_pct"] = common.dead_unit_percent(outp)
            s["zero_outputs_pct"] = common.zero_element_percent(outp)
        else:
            lo, hi = TANH_RANGE if kind == "tanh" else SIGMOID_RANGE
            s["inputs_outside_range_pct"] = common.outside_percent(inp, lo, hi)
            s["range"] = [lo, hi]
            s["input_abs_mean"] = common.fnum(np.nanmean(np.abs(inp)))
        out[name] = s
    return out


def activation_kind(layer):
    if isinstance(layer, layers.ReLU):
        return "relu"
    act = getattr(layer, "activation", None)
    name = getattr(act, "__name__", "")
    if name in ("relu", "tanh", "sigmoid"):
        return name
    return None


def make_data(n, rng, scale=1.0, noisy=False, margin=0.0):
    return common.teacher_data(n, rng, N_FEATURES, N_CLASSES, scale, noisy, margin)


def run(scenario, out_dir):
    cfg = dict(SCENARIOS[scenario])
    common.seed_everything(SEED)
    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    rng = np.random.RandomState(SEED)
    scale = cfg.get("input_scale", 1.0)
    margin = cfg.get("margin", 0.0)
    x_train, y_train = make_data(
        cfg["n_train"], rng, scale, noisy=cfg.get("noisy_train", False), margin=margin
    )
    x_val, y_val = make_data(cfg["n_val"], rng, scale, margin=margin)
    if cfg.get("loss") == "mse":
        y_train = np.eye(N_CLASSES, dtype=np.float32)[y_train]
        y_val = np.eye(N_CLASSES, dtype=np.float32)[y_val]

    inp, out = build_model(cfg)
    model = GradModel(inp, out)
    specs, probe_tensors = [], []
    for layer in model.layers:
        kind = activation_kind(layer)
        if kind:
            specs.append((layer.name, kind))
            probe_tensors += [layer.input, layer.output]
    model.probe = keras.Model(inp, probe_tensors)
    model.probe_specs = specs
    model.records = []
    initial = {v.name: v.numpy().copy() for v in model.trainable_variables}

    if cfg["opt"] == "adam":
        opt = keras.optimizers.Adam(learning_rate=cfg["lr"])
    else:
        opt = keras.optimizers.SGD(learning_rate=cfg["lr"])
    if cfg.get("loss") == "mse":
        loss = keras.losses.MeanSquaredError()
        metrics = ["mse"]
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = ["accuracy"]

    common.fresh_dir(out_dir)
    si = cfg["save_interval"]
    hook = smd.KerasHook(
        out_dir=out_dir,
        save_config=SaveConfig(save_interval=si),
        include_collections=INCLUDE_COLLECTIONS,
    )
    hook.get_collection("losses").save_config = SaveConfig(save_interval=LOSS_SAVE_INTERVAL)
    hook.get_collection("metrics").save_config = SaveConfig(save_interval=LOSS_SAVE_INTERVAL)
    hook.register_model(model)
    model.compile(optimizer=opt, loss=loss, metrics=metrics, run_eagerly=True)
    hist = model.fit(
        x_train,
        y_train,
        batch_size=cfg["batch"],
        epochs=cfg["epochs"],
        validation_data=(x_val, y_val),
        shuffle=True,
        verbose=0,
        callbacks=[hook],
    )
    hook.close()

    recs = model.records
    steps_per_epoch = -(-cfg["n_train"] // cfg["batch"])
    val_steps = -(-cfg["n_val"] // cfg["batch"])
    for i, r in enumerate(recs):
        r["mode_step"] = i
        r["global_step"] = i + (i // steps_per_epoch) * val_steps
    saved = [r for r in recs if r["mode_step"] % si == 0]
    first, last = saved[0], saved[-1]
    grad_means = {}
    for n in initial:
        vals = [r["grad_mean_abs"][n] for r in recs]
        finite = [v for v in vals if isinstance(v, float)]
        grad_means[n] = {
            "first_step": vals[0],
            "last_step": vals[-1],
            "min_finite": min(finite) if finite else None,
            "max_finite": max(finite) if finite else None,
        }
    final = {v.name: v.numpy() for v in model.trainable_variables}
    weight_changes = {n: common.fnum(np.max(np.abs(final[n] - initial[n]))) for n in initial}
    weight_var = {n: common.fnum(np.var(initial[n])) for n in initial if "kernel" in n}
    nan_steps = [
        r["global_step"]
        for r in recs
        if r["loss"] in ("nan", "inf", "-inf") or r["nonfinite_weights"]
    ]
    h = hist.history
    per_epoch = [
        {
            "epoch": e,
            "train_loss_keras_epoch_mean": common.fnum(h["loss"][e]),
            "val_loss": common.fnum(h["val_loss"][e]),
        }
        for e in range(len(h["loss"]))
    ]
    evidence = {
        "measured_by": "the training script (inside train_step, on the batch being trained), "
        "not smdebug",
        "dead_relu_definition": "unit dead = output <= 0 for every sample of the batch; for "
        "Dense(activation='relu') the Dense layer's own output",
        "saturation_ranges": {"tanh": TANH_RANGE, "sigmoid": SIGMOID_RANGE},
        "activations_first_saved_train_step": {
            "global_step": first["global_step"],
            "layers": first["activations"],
        },
        "activations_last_saved_train_step": {
            "global_step": last["global_step"],
            "layers": last["activations"],
        },
        "gradient_mean_abs_per_variable": grad_means,
        "initial_kernel_variance": weight_var,
        "max_abs_weight_change": weight_changes,
        "weights_changed": any(v != 0.0 for v in weight_changes.values()),
        "nan_or_inf_seen": bool(nan_steps),
        "first_nonfinite_global_step": nan_steps[0] if nan_steps else None,
        "train_batch_loss_per_step": [r["loss"] for r in recs],
        "train_batch_loss_global_steps": [r["global_step"] for r in recs],
        "per_epoch": per_epoch,
    }
    labels = {
        "framework": "tensorflow2-keras",
        "versions": common.versions(tensorflow=tf.__version__, keras=keras.__version__),
        "scenario": scenario,
        "trial": f"keras_{scenario}",
        "description": cfg["description"],
        "config": {
            k: v
            for k, v in SCENARIOS[scenario].items()
            if k not in ("description", "kernel_init", "bias_init")
        },
        "layers": [
            {
                "name": layer.name,
                "class": type(layer).__name__,
                "activation": getattr(getattr(layer, "activation", None), "__name__", None),
            }
            for layer in model.layers
        ],
        "hook": {
            "class": "smdebug.tensorflow.KerasHook",
            "save_config": {
                "save_interval": si,
                "modes": "same for TRAIN and EVAL",
                "losses_and_metrics_collections_save_interval": LOSS_SAVE_INTERVAL,
            },
            "include_collections": INCLUDE_COLLECTIONS,
            "calls": [
                "hook.register_model(model)",
                "model.compile(..., run_eagerly=True)",
                "model.fit(..., validation_data=..., callbacks=[hook])",
                "hook.close()",
                "train_step returns smdebug_gradients, smdebug_y, smdebug_y_pred in logs",
            ],
            "workarounds_needed": "gradients/labels/predictions: train_step override (vanilla "
            "TF gives the hook none); layer values: register_model + "
            "run_eagerly=True",
        },
        "expected": EXPECTED[scenario],
        "also_supported_by_evidence": common.side_effects(evidence, EXPECTED[scenario]),
        "evidence": evidence,
    }
    common.write_labels(out_dir, labels)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
