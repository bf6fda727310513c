"""The model and scenario definitions of keras_trials.py: a functional Keras model mixing
user-named and auto-named layers (``standard_model``), a deep auto-named sigmoid stack
(``deep_sigmoid_model``), each scenario's configuration (``SCENARIOS``) and the built-in rules it
should make fire (``EXPECTED``). Imported by keras_trials.py, which trains and measures.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_DETERMINISTIC_OPS", "1")
import common  # noqa: E402  (keras_trials.py puts this folder on sys.path)
from tensorflow import keras  # noqa: E402
from tensorflow.keras import layers  # noqa: E402

SEED = 1234
N_FEATURES = 8
N_CLASSES = 3


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


def build_model(cfg):
    """The scenario's model (its input and output tensors); ``all_kernels`` fills cfg's
    kernel_init with seeded N(0, std^2) initialisers first."""
    if cfg.get("all_kernels"):
        std = cfg["all_kernels"]
        cfg["kernel_init"] = {
            n: rn(cfg.get("kernel_std", {}).get(n, std), SEED + i)
            for i, n in enumerate(
                ["dense_in", "hidden_relu", "auto1", "auto2", "pre_sigmoid", "logits"]
            )
        }
    if cfg.get("model") == "deep_sigmoid":
        return deep_sigmoid_model(cfg)
    return standard_model(cfg)


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

EXPECTED = common.NN_EXPECTED
