"""TensorFlow 2 Keras (model.fit) trials written by smdebug 1.0.34's real KerasHook.

Run inside the "tf" venv:  python keras_trials.py --scenario healthy --out DIR

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
from smdebug.core.save_config import SaveConfig  # noqa: E402

SEED = 1234
N_FEATURES = 8
N_CLASSES = 3
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


def standard_model(cfg):
    """Mixed naming: some layers user-named, others auto-named by Keras."""
    k = cfg.get("kernel_init", {})
    b = cfg.get("bias_init", {})
    h = cfg.get("hidden", 16)

    def dense(units, name=None, activation=None):
        if not name:
            dense.n += 1  # the n-th auto-named Dense is "auto<n>" in kernel_init/bias_init
        key = name or f"auto{dense.n}"
        return layers.Dense(
            units,
            name=name,
            activation=activation,
            kernel_initializer=k.get(key, "glorot_uniform"),
            bias_initializer=b.get(key, "zeros"),
        )

    dense.n = 0

    inp = keras.Input(shape=(N_FEATURES,))
    x = dense(h, name="dense_in")(inp)
    x = layers.ReLU()(x)  # auto: re_lu
    x = dense(h, name="hidden_relu", activation="relu")(x)  # relu inside Dense
    x = dense(h)(x)  # auto: dense
    x = layers.Activation("tanh")(x)  # auto: activation
    x = dense(h)(x)  # auto: dense_1
    x = layers.ReLU()(x)  # auto: re_lu_1
    x = dense(8, name="pre_sigmoid")(x)
    x = layers.Activation("sigmoid", name="sigmoid_act")(x)
    out = dense(N_CLASSES, name="logits")(x)
    return inp, out


def deep_sigmoid_model(cfg, depth=8, width=16):
    init = keras.initializers.RandomNormal(stddev=0.01, seed=SEED)
    inp = keras.Input(shape=(N_FEATURES,))
    x = inp
    for _ in range(depth):
        x = layers.Dense(width, kernel_initializer=init)(x)  # auto: dense, dense_1, ...
        x = layers.Activation("sigmoid")(x)  # auto: activation, activation_1...
    out = layers.Dense(N_CLASSES, name="logits")(x)
    return inp, out


def rn(std, seed=SEED):
    return keras.initializers.RandomNormal(stddev=std, seed=seed)


SCENARIOS = {
    "healthy": dict(
        n_train=2048,
        n_val=512,
        batch=128,
        epochs=5,
        lr=0.005,
        opt="adam",
        save_interval=16,
        margin=0.5,
        description="Functional Keras model dense_in-ReLU(re_lu)-Dense(hidden_relu, "
        "activation='relu')-Dense(dense)-Activation('tanh')(activation)-Dense(dense_1)-"
        "ReLU(re_lu_1)-Dense(pre_sigmoid)-Activation('sigmoid', name='sigmoid_act')-"
        "Dense(logits); Glorot init, standardised inputs, well-separated classes (teacher "
        "margin 0.5), Adam lr=0.005, 5 epochs of 16 batches of 128 with validation_data (4 "
        "batches). The loss falls from the first steps, the model learns every class and "
        "does not overfit; nothing is wrong.",
    ),
    "vanishing_gradients": dict(
        model="deep_sigmoid",
        n_train=64,
        n_val=16,
        batch=16,
        epochs=3,
        lr=0.1,
        opt="sgd",
        save_interval=4,
        description="8 auto-named Dense(16)+Activation('sigmoid') blocks, kernels N(0, 0.01^2), "
        "SGD lr=0.1: the gradients of the early layers are many orders of magnitude below "
        "1e-7 from the first step on.",
    ),
    "exploding": dict(
        n_train=64,
        n_val=16,
        batch=16,
        epochs=4,
        lr=50.0,
        opt="sgd",
        save_interval=2,
        input_scale=10.0,
        loss="mse",
        all_kernels=3.0,
        description="The standard model with every kernel N(0, 3^2), inputs x10, MSE on one-hot "
        "targets, SGD lr=50: weights, gradients and the loss overflow to inf and NaN.",
    ),
    "dead_relu": dict(
        n_train=128,
        n_val=32,
        batch=16,
        epochs=3,
        lr=0.01,
        opt="adam",
        save_interval=6,
        bias_init={
            "dense_in": keras.initializers.Constant(-10.0),
            "hidden_relu": keras.initializers.Constant(-10.0),
            "auto2": keras.initializers.Constant(-10.0),
        },
        description="The standard model with the biases of dense_in, hidden_relu and dense_1 "
        "(which feed re_lu, hidden_relu's own relu and re_lu_1) set to -10: nearly every unit of "
        "those ReLUs outputs 0 for every sample and stays dead. Everything else is normal.",
    ),
    "saturated": dict(
        n_train=64,
        n_val=16,
        batch=16,
        epochs=3,
        lr=0.01,
        opt="adam",
        save_interval=4,
        input_scale=50.0,
        all_kernels=1.0,
        kernel_std={"pre_sigmoid": 30.0},
        description="The standard model fed unscaled inputs (x50) with every kernel N(0, 1) "
        "(pre_sigmoid N(0, 30^2)): "
        "the inputs of Activation('tanh') (activation) and Activation('sigmoid') (sigmoid_act) "
        "lie far outside (-9.5, 9.5) / (-23, 17) for most units.",
    ),
    "poor_init": dict(
        n_train=128,
        n_val=32,
        batch=16,
        epochs=3,
        lr=0.01,
        opt="sgd",
        save_interval=6,
        kernel_init={
            "dense_in": rn(10.0),
            "hidden_relu": rn(0.01),
            "auto1": keras.initializers.Constant(0.5),
            "auto2": rn(5.0),
        },
        description="The standard model with a poor initialisation: dense_in kernel N(0, 10^2), "
        "hidden_relu N(0, 0.01^2), dense all-constant 0.5, dense_1 N(0, 5^2): weight variances "
        "differ by orders of magnitude and the loss barely improves over the first steps "
        "(SGD lr=0.01); hidden_relu ends up mostly dead (see also_supported_by_evidence).",
    ),
    "flat_loss": dict(
        n_train=16,
        n_val=16,
        batch=16,
        epochs=12,
        lr=0.0,
        opt="sgd",
        save_interval=3,
        description="The standard model trained with SGD lr=0.0 on one full batch of 16 samples "
        "per epoch (12 epochs, validation each epoch): the batch loss is identical at every "
        "step and no weight changes.",
    ),
    "overfit": dict(
        n_train=32,
        n_val=32,
        batch=16,
        epochs=50,
        lr=0.01,
        opt="adam",
        save_interval=40,
        hidden=24,
        noisy_train=True,
        description="The standard model with 24 hidden units trained for 50 epochs (Adam "
        "lr=0.01) on 32 training samples with random labels, validated on 32 samples labelled "
        "by the teacher: training loss falls while validation loss rises.",
    ),
}

EXPECTED = {
    "healthy": [],
    "vanishing_gradients": ["VanishingGradient"],
    "exploding": ["ExplodingTensor"],
    "dead_relu": ["DeadRelu"],
    "saturated": ["SaturatedActivation", "TanhSaturation", "SigmoidSaturation"],
    "poor_init": ["PoorWeightInitialization"],
    "flat_loss": ["LossNotDecreasing", "WeightUpdateRatio"],
    "overfit": ["Overfit"],
}


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

    if cfg.get("all_kernels"):
        std = cfg["all_kernels"]
        cfg["kernel_init"] = {
            n: rn(cfg.get("kernel_std", {}).get(n, std), SEED + i)
            for i, n in enumerate(
                ["dense_in", "hidden_relu", "auto1", "auto2", "pre_sigmoid", "logits"]
            )
        }
    if cfg.get("model") == "deep_sigmoid":
        inp, out = deep_sigmoid_model(cfg)
    else:
        inp, out = standard_model(cfg)
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
