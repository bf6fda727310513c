"""The models and scenario definitions of pytorch_trials.py: ``Net`` (activations as named
attributes), ``FeatureNet`` (activations inside an nn.Sequential attribute), a bare deep sigmoid
nn.Sequential, each scenario's configuration (``SCENARIOS``), the built-in rules it should make
fire (``EXPECTED``) and ``build_model`` (the model with the scenario's initialisation).
Imported by pytorch_trials.py, which trains and measures.
"""

import common  # pytorch_trials.py puts this folder on sys.path
import torch
import torch.nn as nn

N_FEATURES = 8
N_CLASSES = 3


class Net(nn.Module):
    """Activations as named attributes: tensor names carry the attribute name (relu1_output_0)."""

    def __init__(self, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, hidden)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(hidden, hidden)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(hidden, hidden)
        self.tanh1 = nn.Tanh()
        self.fc4 = nn.Linear(hidden, 8)
        self.sigmoid1 = nn.Sigmoid()
        self.out = nn.Linear(8, N_CLASSES)

    def forward(self, x):
        x = self.relu1(self.fc1(x))
        x = self.relu2(self.fc2(x))
        x = self.tanh1(self.fc3(x))
        x = self.sigmoid1(self.fc4(x))
        return self.out(x)


class FeatureNet(nn.Module):
    """Activations inside an nn.Sequential attribute: tensor names are features.<index>_..."""

    def __init__(self, hidden=16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Linear(N_FEATURES, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 8),
            nn.Sigmoid(),
        )
        self.classifier = nn.Linear(8, N_CLASSES)

    def forward(self, x):
        return self.classifier(self.features(x))


def deep_sigmoid_sequential(depth=8, width=16):
    """A bare nn.Sequential as the whole model: tensor names are <index>_output_0."""
    layers = [nn.Linear(N_FEATURES, width), nn.Sigmoid()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.Sigmoid()]
    layers += [nn.Linear(width, N_CLASSES)]
    return nn.Sequential(*layers)


SCENARIOS = {
    "healthy": dict(
        model="Net",
        n_train=2048,
        n_val=512,
        batch=128,
        epochs=3,
        lr=0.005,
        opt="adam",
        save_interval=16,
        margin=0.5,
        description="Net (fc1-relu1-fc2-relu2-fc3-tanh1-fc4-sigmoid1-out, activations as named "
        "attributes), PyTorch default init, standardised inputs, well-separated classes "
        "(teacher margin 0.5), Adam lr=0.005, 3 epochs of 16 train batches of 128, a 4-batch "
        "validation pass after every epoch. The loss falls from the first steps and the model "
        "does not overfit; nothing is wrong.",
    ),
    "vanishing_gradients": dict(
        model="DeepSigmoid",
        n_train=64,
        n_val=16,
        batch=16,
        epochs=3,
        lr=0.1,
        opt="sgd",
        save_interval=4,
        init="tiny",
        description="A bare nn.Sequential of 8 Linear(16)+Sigmoid blocks, weights N(0, 0.01^2), "
        "zero biases, SGD lr=0.1. The gradients of the early layers are many orders of "
        "magnitude below 1e-7 from the first step on.",
    ),
    "exploding": dict(
        model="Net",
        n_train=64,
        n_val=16,
        batch=16,
        epochs=4,
        lr=50.0,
        opt="sgd",
        save_interval=2,
        init="large",
        input_scale=10.0,
        loss="mse",
        description="Net with weights N(0, 3^2), inputs x10, MSELoss on one-hot targets, SGD "
        "lr=50. Weights, gradients and the loss overflow to inf and NaN within a few steps.",
    ),
    "dead_relu": dict(
        model="Net",
        n_train=128,
        n_val=32,
        batch=16,
        epochs=3,
        lr=0.01,
        opt="adam",
        save_interval=6,
        init="dead",
        description="Net with default init except the biases of fc1 and fc2 (which feed relu1 and "
        "relu2) set to -10: almost every unit of relu1/relu2 outputs 0 for every sample and "
        "stays dead (zero gradient). Inputs, optimiser and the rest of the network are normal.",
    ),
    "saturated": dict(
        model="FeatureNet",
        n_train=64,
        n_val=16,
        batch=16,
        epochs=3,
        lr=0.01,
        opt="adam",
        save_interval=4,
        init="saturate",
        input_scale=50.0,
        description="FeatureNet (features = nn.Sequential(Linear, Tanh, Linear, ReLU, Linear, "
        "Sigmoid), classifier) fed unscaled inputs (x50) with weights N(0, 1) (N(0, 10^2) for features.4): the inputs of the "
        "Tanh (features.1) and Sigmoid (features.5) lie far outside (-9.5, 9.5) / (-23, 17).",
    ),
    "poor_init": dict(
        model="Net",
        n_train=128,
        n_val=32,
        batch=16,
        epochs=3,
        lr=0.01,
        opt="sgd",
        save_interval=6,
        init="poor",
        description="Net with a poor initialisation: fc1 weights N(0, 10^2), fc2 N(0, 0.01^2), "
        "fc3 all-constant 0.5, fc4 N(0, 5^2); weight variances differ by up to 6 orders of "
        "magnitude, some sigmoid1 inputs saturate, and the loss barely improves over the first "
        "steps (SGD lr=0.01).",
    ),
    "flat_loss": dict(
        model="Net",
        n_train=16,
        n_val=16,
        batch=16,
        epochs=12,
        lr=0.0,
        opt="sgd",
        save_interval=3,
        description="Net with default init trained with SGD lr=0.0 on one full batch of 16 "
        "samples per epoch (12 epochs, validation each epoch): the training loss is exactly "
        "the same at every step and no weight changes.",
    ),
    "overfit": dict(
        model="Net",
        hidden=24,
        n_train=32,
        n_val=32,
        batch=16,
        epochs=50,
        lr=0.01,
        opt="adam",
        save_interval=40,
        noisy_train=True,
        description="Net with 24 hidden units trained for 50 epochs (Adam lr=0.01) on a tiny "
        "training set of 32 samples with random labels, validated on 32 samples labelled by "
        "the teacher: training loss falls while validation loss rises.",
    ),
}

EXPECTED = common.NN_EXPECTED


def build_model(cfg):
    kind = cfg["model"]
    if kind == "Net":
        m = Net(cfg.get("hidden", 16))
    elif kind == "FeatureNet":
        m = FeatureNet()
    else:
        m = deep_sigmoid_sequential()
    init = cfg.get("init")
    with torch.no_grad():
        if init == "tiny":
            for mod in m.modules():
                if isinstance(mod, nn.Linear):
                    mod.weight.normal_(0.0, 0.01)
                    mod.bias.zero_()
        elif init == "large":
            for mod in m.modules():
                if isinstance(mod, nn.Linear):
                    mod.weight.normal_(0.0, 3.0)
        elif init == "dead":
            m.fc1.bias.fill_(-10.0)
            m.fc2.bias.fill_(-10.0)
        elif init == "saturate":
            for mod in m.modules():
                if isinstance(mod, nn.Linear):
                    mod.weight.normal_(0.0, 1.0)
            m.features[4].weight.normal_(0.0, 10.0)
        elif init == "poor":
            m.fc1.weight.normal_(0.0, 10.0)
            m.fc2.weight.normal_(0.0, 0.01)
            m.fc3.weight.fill_(0.5)
            m.fc4.weight.normal_(0.0, 5.0)
    return m
