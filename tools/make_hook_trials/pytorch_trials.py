"""PyTorch trials written by smdebug 1.0.34's real smdebug.pytorch.Hook.

Run inside the "torch" venv:  python pytorch_trials.py --scenario healthy --out DIR
The evidence in labels.json is measured here with plain torch forward hooks and autograd, never
read back through smdebug.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import smdebug  # noqa: E402,F401
from smdebug import modes  # noqa: E402
from smdebug.core.save_config import SaveConfig  # noqa: E402
from smdebug.pytorch import Hook  # noqa: E402

SEED = 1234
N_FEATURES = 8
N_CLASSES = 3
TANH_RANGE = (-9.5, 9.5)
SIGMOID_RANGE = (-23.0, 17.0)
LAYER_REGEX = r"_(input|output)_\d+$"
LOSS_SAVE_INTERVAL = 1
INCLUDE_COLLECTIONS = ["weights", "biases", "gradients", "losses", "layers"]


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


def make_data(n, rng, scale=1.0, noisy=False, margin=0.0):
    x, y = common.teacher_data(n, rng, N_FEATURES, N_CLASSES, scale, noisy, margin)
    return torch.from_numpy(x), torch.from_numpy(y)


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


class ActivationProbe:
    """Plain torch forward hooks on the activation modules (independent of smdebug)."""

    def __init__(self, model):
        self.last = {}
        self.kinds = {}
        for name, mod in model.named_modules():
            kind = {nn.ReLU: "relu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid"}.get(type(mod))
            if kind:
                self.kinds[name] = kind
                mod.register_forward_hook(self._make(name))

    def _make(self, name):
        def hook(mod, inputs, output):
            self.last[name] = (inputs[0].detach().numpy().copy(), output.detach().numpy().copy())

        return hook

    def stats(self):
        out = {}
        for name, (inp, outp) in self.last.items():
            kind = self.kinds[name]
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


def run(scenario, out_dir):
    cfg = SCENARIOS[scenario]
    common.seed_everything(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    rng = np.random.RandomState(SEED)
    scale = cfg.get("input_scale", 1.0)
    margin = cfg.get("margin", 0.0)
    x_train, y_train = make_data(
        cfg["n_train"], rng, scale, noisy=cfg.get("noisy_train", False), margin=margin
    )
    x_val, y_val = make_data(cfg["n_val"], rng, scale, margin=margin)

    model = build_model(cfg)
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    loss_fn = nn.MSELoss() if cfg.get("loss") == "mse" else nn.CrossEntropyLoss()

    def target(yb):
        if cfg.get("loss") == "mse":
            return nn.functional.one_hot(yb, N_CLASSES).float()
        return yb

    if cfg["opt"] == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    else:
        opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])

    common.fresh_dir(out_dir)
    save_config = SaveConfig(save_interval=cfg["save_interval"])
    hook = Hook(out_dir=out_dir, save_config=save_config, include_collections=INCLUDE_COLLECTIONS)
    # losses every step (a collection's own save_config, as the SDK's CollectionConfig allows),
    # everything else every save_interval steps.
    hook.get_collection("losses").save_config = SaveConfig(save_interval=LOSS_SAVE_INTERVAL)
    # The one collection we define ourselves: every module input and output.  PyTorch's hook has
    # no inputs/outputs/layers collection of its own (DEFAULT_PYTORCH_COLLECTIONS).
    hook.get_collection("layers").include(LAYER_REGEX)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    probe = ActivationProbe(model)

    gstep = -1
    train_records, eval_records = [], []
    epochs = []
    bs = cfg["batch"]
    for epoch in range(cfg["epochs"]):
        hook.set_mode(modes.TRAIN)
        model.train()
        perm = torch.from_numpy(rng.permutation(cfg["n_train"]))
        losses = []
        for i in range(0, cfg["n_train"], bs):
            idx = perm[i : i + bs]
            xb, yb = x_train[idx], y_train[idx]
            gstep += 1
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, target(yb))
            loss.backward()
            grads = {
                n: common.fnum(p.grad.abs().mean()) if p.grad is not None else None
                for n, p in model.named_parameters()
            }
            train_records.append(
                {
                    "global_step": gstep,
                    "mode_step": len(train_records),
                    "loss": common.fnum(loss.item()),
                    "grad_mean_abs": grads,
                    "activations": probe.stats(),
                    "nonfinite_weights": any(
                        not torch.isfinite(p).all().item() for p in model.parameters()
                    ),
                }
            )
            opt.step()
            losses.append(loss.item())
        hook.set_mode(modes.EVAL)
        model.eval()
        vlosses, correct = [], 0
        with torch.no_grad():
            for i in range(0, cfg["n_val"], bs):
                xb, yb = x_val[i : i + bs], y_val[i : i + bs]
                gstep += 1
                out = model(xb)
                vloss = loss_fn(out, target(yb))
                vlosses.append(vloss.item())
                correct += int((out.argmax(1) == yb).sum())
                eval_records.append(
                    {
                        "global_step": gstep,
                        "mode_step": len(eval_records),
                        "loss": common.fnum(vloss.item()),
                    }
                )
        val_acc = correct / cfg["n_val"]
        hook.save_scalar("val_accuracy", val_acc)
        epochs.append(
            {
                "epoch": epoch,
                "train_loss_mean": common.fnum(np.mean(losses)),
                "val_loss_mean": common.fnum(np.mean(vlosses)),
                "val_accuracy": common.fnum(val_acc),
            }
        )
    hook.close()

    si = cfg["save_interval"]
    saved_train = [r for r in train_records if r["mode_step"] % si == 0]
    first, last = saved_train[0], saved_train[-1]
    grad_means = {}
    for n in initial:
        vals = [r["grad_mean_abs"][n] for r in train_records if r["grad_mean_abs"][n] is not None]
        finite = [v for v in vals if isinstance(v, float)]
        grad_means[n] = {
            "first_step": vals[0] if vals else None,
            "last_step": vals[-1] if vals else None,
            "min_finite": min(finite) if finite else None,
            "max_finite": max(finite) if finite else None,
        }
    weight_changes = {
        n: common.fnum((p.detach() - initial[n]).abs().max()) for n, p in model.named_parameters()
    }
    weight_var = {n: common.fnum(initial[n].var()) for n in initial if n.endswith("weight")}
    nan_steps = [
        r["global_step"]
        for r in train_records
        if r["loss"] in ("nan", "inf", "-inf") or r["nonfinite_weights"]
    ]
    evidence = {
        "measured_by": "the training script (torch forward hooks / autograd), not smdebug",
        "dead_relu_definition": "unit dead = output <= 0 for every sample of the batch",
        "saturation_ranges": {"tanh": TANH_RANGE, "sigmoid": SIGMOID_RANGE},
        "activations_first_saved_train_step": {
            "global_step": first["global_step"],
            "layers": first["activations"],
        },
        "activations_last_saved_train_step": {
            "global_step": last["global_step"],
            "layers": last["activations"],
        },
        "gradient_mean_abs_per_parameter": grad_means,
        "initial_weight_variance": weight_var,
        "max_abs_weight_change": weight_changes,
        "weights_changed": any(v != 0.0 for v in weight_changes.values()),
        "nan_or_inf_seen": bool(nan_steps),
        "first_nonfinite_global_step": nan_steps[0] if nan_steps else None,
        "train_loss_per_step": [r["loss"] for r in train_records],
        "train_loss_global_steps": [r["global_step"] for r in train_records],
        "val_loss_per_step": [r["loss"] for r in eval_records],
        "val_loss_global_steps": [r["global_step"] for r in eval_records],
        "per_epoch": epochs,
    }
    labels = {
        "framework": "pytorch",
        "versions": common.versions(torch=torch.__version__),
        "scenario": scenario,
        "trial": f"pytorch_{scenario}",
        "description": cfg["description"],
        "config": {k: v for k, v in cfg.items() if k != "description"},
        "hook": {
            "class": "smdebug.pytorch.Hook",
            "save_config": {
                "save_interval": si,
                "modes": "same for TRAIN and EVAL",
                "losses_collection_save_interval": LOSS_SAVE_INTERVAL,
            },
            "include_collections": INCLUDE_COLLECTIONS,
            "user_collections": {"layers": {"include_regex": [LAYER_REGEX]}},
            "calls": [
                "hook.register_module(model)",
                f"hook.register_loss(nn.{type(loss_fn).__name__}())",
                "hook.set_mode(modes.TRAIN|EVAL) around each loop",
                "hook.save_scalar('val_accuracy', ...) after each validation pass",
                "hook.close()",
            ],
            "workarounds_needed": "none: torch 2.13.0 CPU works with smdebug 1.0.34 as is",
        },
        "expected": EXPECTED[scenario],
        "also_supported_by_evidence": common.side_effects(evidence, EXPECTED[scenario]),
        "evidence": evidence,
    }
    common.write_labels(out_dir, labels)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
