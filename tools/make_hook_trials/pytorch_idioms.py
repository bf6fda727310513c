"""PyTorch idioms the rules must read right, written by smdebug 1.0.34's real smdebug.pytorch.Hook.

Run inside the "torch" venv:  python pytorch_idioms.py --scenario reused_relu --out DIR
(make.py runs every scenario). The evidence in labels.json is measured here with plain torch
forward hooks, one record per CALL of a module (the hook names the n-th call of a module
``<module>_output_<n>``), never read back through smdebug.

* ``reused_relu``: a ResNet-style block that reuses ONE ``nn.ReLU(inplace=True)`` three times;
  its second call (after ``fc_a``, bias -10) is 100 % dead, the first and third are not.
* ``shared_tanh``: one ``nn.Tanh`` shared by two branches; the second branch's inputs are
  saturated (bias 50), the first's are not.
* ``sigmoid_collection``: a sigmoid module named ``gate`` whose input only a user collection
  ``CollectionConfig("sigmoid_input")`` saves (no ``layers`` collection: its output is not
  saved, so neither its name nor its values tell what it is); its inputs are saturated
  (bias 100).
* ``nan_start``: the first 3 training batches hold a NaN feature (missing values), the loss
  is NaN there and the step is skipped (GradScaler's idiom); then SGD lr=1e-5: the loss never
  really falls.
* ``sigmoid_flat``: 6 sigmoid layers, SGD lr=1e-5 on mini-batches: the loss never falls.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from smdebug import modes  # noqa: E402
from smdebug.core.save_config import SaveConfig  # noqa: E402
from smdebug.pytorch import Hook  # noqa: E402

SEED = 1234
N_FEATURES, N_CLASSES = 8, 3
TANH_RANGE, SIGMOID_RANGE = (-9.5, 9.5), (-23.0, 17.0)
LAYER_REGEX = r"_(input|output)_\d+$"


class ResBlockNet(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc_in = nn.Linear(N_FEATURES, hidden)
        self.relu = nn.ReLU(inplace=True)  # called three times per forward
        self.fc_a = nn.Linear(hidden, hidden)
        self.fc_b = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, N_CLASSES)

    def forward(self, x):
        h = self.relu(self.fc_in(x))  # call 0
        r = self.relu(self.fc_a(h))  # call 1: dead (bias -10)
        h = self.relu(h + self.fc_b(r))  # call 2: the residual sum
        return self.out(h)


class TwoBranchTanh(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc_in = nn.Linear(N_FEATURES, hidden)
        self.act = nn.Tanh()  # shared by both branches
        self.fc_a = nn.Linear(hidden, 8)
        self.fc_b = nn.Linear(hidden, 8)
        self.out = nn.Linear(16, N_CLASSES)

    def forward(self, x):
        h = torch.relu(self.fc_in(x))
        a = self.act(self.fc_a(h))  # call 0: healthy
        b = self.act(self.fc_b(h))  # call 1: saturated
        return self.out(torch.cat([a, b], dim=1))


class GateNet(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, hidden)
        self.gate = nn.Sigmoid()
        self.out = nn.Linear(hidden, N_CLASSES)

    def forward(self, x):
        return self.out(self.gate(self.fc1(x)))


class PlainNet(nn.Module):
    def __init__(self, hidden=16, depth=1, act=nn.ReLU):
        super().__init__()
        layers, width = [], N_FEATURES
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), act()]
            width = hidden
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(width, N_CLASSES)

    def forward(self, x):
        return self.out(self.body(x))


SCENARIOS = {
    "reused_relu": dict(
        lr=0.01,
        expected=["DeadRelu"],
        description="ResNet-style block "
        "reusing one nn.ReLU(inplace=True) three times (relu_output_0/1/2); "
        "the second call follows fc_a with bias -10 and is 100 % dead, the "
        "first and third calls are alive. Adam lr=0.01.",
    ),
    "shared_tanh": dict(
        lr=0.01,
        expected=["SaturatedActivation"],
        description="One nn.Tanh "
        "module shared by two branches (act_input_0 / act_input_1); branch b's "
        "bias is 50: its tanh inputs lie outside (-9.5, 9.5) for every sample, "
        "branch a's do not. Adam lr=0.01.",
    ),
    "sigmoid_collection": dict(
        lr=0.01,
        expected=["SaturatedActivation"],
        description="A "
        "sigmoid module named gate whose input only the user collection "
        "sigmoid_input saves (include_regex gate_input_0; no layers "
        "collection). fc1's bias is 100: the gate's "
        "inputs lie outside (-23, 17) for every sample. Adam lr=0.01.",
    ),
    "nan_start": dict(
        lr=1e-5,
        expected=["ExplodingTensor", "LossNotDecreasing"],
        description="The first 3 training batches hold a NaN feature: the loss "
        "is NaN there and the optimiser step is skipped (GradScaler's idiom); "
        "then SGD lr=1e-5 on clean batches: the loss never really falls.",
    ),
    "sigmoid_flat": dict(
        lr=1e-5,
        expected=["LossNotDecreasing"],
        description="6 Linear(16) + "
        "Sigmoid layers, SGD lr=1e-5 on mini-batches of 16: the loss never "
        "falls more than batch noise (it never gets 0.1 % below its first "
        "values for long).",
    ),
}
SAVE_INTERVAL, BATCH, N_TRAIN, N_VAL, EPOCHS = 4, 16, 192, 32, 4


def build(scenario):
    if scenario == "reused_relu":
        m = ResBlockNet()
        with torch.no_grad():
            m.fc_a.bias.fill_(-10.0)
    elif scenario == "shared_tanh":
        m = TwoBranchTanh()
        with torch.no_grad():
            m.fc_b.bias.fill_(50.0)
    elif scenario == "sigmoid_collection":
        m = GateNet()
        with torch.no_grad():
            m.fc1.bias.fill_(100.0)
    elif scenario == "sigmoid_flat":
        m = PlainNet(depth=6, act=nn.Sigmoid)
    else:
        m = PlainNet()
    return m


class CallProbe:
    """Plain torch forward hooks: inputs/outputs of every call of each activation module."""

    KINDS = {nn.ReLU: "relu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid"}

    def __init__(self, model):
        self.calls, self.kinds = {}, {}
        for name, mod in model.named_modules():
            kind = self.KINDS.get(type(mod))
            if kind:
                self.kinds[name] = kind
                mod.register_forward_pre_hook(self._pre(name))
                mod.register_forward_hook(self._post(name))

    def reset(self):
        self.calls = {}

    def _pre(self, name):
        def hook(mod, inputs):  # before an inplace ReLU overwrites its input
            self.calls.setdefault(name, []).append([inputs[0].detach().numpy().copy(), None])

        return hook

    def _post(self, name):
        def hook(mod, inputs, output):
            self.calls[name][-1][1] = output.detach().numpy().copy()

        return hook

    def stats(self):
        out = {}
        for name, calls in self.calls.items():
            kind = self.kinds[name]
            for i, (inp, outp) in enumerate(calls):
                s = {"kind": kind, "call": i, "nonfinite": common.has_nonfinite(inp, outp)}
                if kind == "relu":
                    s["dead_units_pct"] = common.dead_unit_percent(outp)
                else:
                    lo, hi = TANH_RANGE if kind == "tanh" else SIGMOID_RANGE
                    s["inputs_outside_range_pct"] = common.outside_percent(inp, lo, hi)
                    inside = ((inp > lo) & (inp < hi)).reshape(len(inp), -1).mean(axis=0)
                    s["saturated_units_pct"] = common.fnum(100.0 * np.mean(inside < 0.01))
                out[f"{name}[{i}]" if i else name] = s
        return out


def run(scenario, out_dir):
    cfg = SCENARIOS[scenario]
    common.seed_everything(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    rng = np.random.RandomState(SEED)
    scale = 1.0
    x_train, y_train = common.teacher_data(N_TRAIN, rng, N_FEATURES, N_CLASSES, scale)
    x_val, y_val = common.teacher_data(N_VAL, rng, N_FEATURES, N_CLASSES, scale)
    x_train, y_train = torch.from_numpy(x_train), torch.from_numpy(y_train)
    x_val, y_val = torch.from_numpy(x_val), torch.from_numpy(y_val)
    model = build(scenario)
    loss_fn = nn.CrossEntropyLoss()
    if scenario in ("nan_start", "sigmoid_flat"):
        opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    else:
        opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])

    common.fresh_dir(out_dir)
    if scenario == "sigmoid_collection":
        collections = ["weights", "biases", "gradients", "losses", "sigmoid_input"]
    else:
        collections = ["weights", "biases", "gradients", "losses", "layers"]
    hook = Hook(out_dir=out_dir, save_config=SaveConfig(save_interval=SAVE_INTERVAL),
                include_collections=collections)  # fmt: skip
    hook.get_collection("losses").save_config = SaveConfig(save_interval=1)
    if scenario == "sigmoid_collection":
        hook.get_collection("sigmoid_input").include(r"gate_input_\d+$")
    else:
        hook.get_collection("layers").include(LAYER_REGEX)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    probe = CallProbe(model)

    gstep, train_records, eval_records, epochs = -1, [], [], []
    for epoch in range(EPOCHS):
        hook.set_mode(modes.TRAIN)
        model.train()
        perm = torch.from_numpy(rng.permutation(N_TRAIN))
        losses = []
        for i in range(0, N_TRAIN, BATCH):
            xb, yb = x_train[perm[i : i + BATCH]].clone(), y_train[perm[i : i + BATCH]]
            gstep += 1
            if scenario == "nan_start" and len(train_records) < 3:
                xb[:, 0] = float("nan")  # a missing feature in the first batches
            probe.reset()
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            if torch.isfinite(loss):
                opt.step()  # a NaN loss's step is skipped, as GradScaler does
            train_records.append({"global_step": gstep, "mode_step": len(train_records),
                                  "loss": common.fnum(loss.item()),
                                  "activations": probe.stats()})  # fmt: skip
            losses.append(loss.item())
        hook.set_mode(modes.EVAL)
        model.eval()
        vlosses = []
        with torch.no_grad():
            for i in range(0, N_VAL, BATCH):
                gstep += 1
                vloss = loss_fn(model(x_val[i : i + BATCH]), y_val[i : i + BATCH])
                vlosses.append(vloss.item())
                eval_records.append({"global_step": gstep, "loss": common.fnum(vloss.item())})
        epochs.append({"epoch": epoch, "train_loss_mean": common.fnum(np.nanmean(losses)),
                       "val_loss_mean": common.fnum(np.mean(vlosses))})  # fmt: skip
    hook.close()

    saved = [r for r in train_records if r["mode_step"] % SAVE_INTERVAL == 0]
    nan_steps = [r["global_step"] for r in train_records if r["loss"] in ("nan", "inf", "-inf")]
    evidence = {
        "measured_by": "the training script (torch forward hooks, one record per call)",
        "dead_relu_definition": "unit dead = output <= 0 for every sample of the batch",
        "saturation_ranges": {"tanh": TANH_RANGE, "sigmoid": SIGMOID_RANGE},
        "activations_first_saved_train_step": {"global_step": saved[0]["global_step"],
                                               "layers": saved[0]["activations"]},
        "activations_last_saved_train_step": {"global_step": saved[-1]["global_step"],
                                              "layers": saved[-1]["activations"]},
        "nan_or_inf_seen": bool(nan_steps),
        "first_nonfinite_global_step": nan_steps[0] if nan_steps else None,
        "train_loss_per_step": [r["loss"] for r in train_records],
        "train_loss_global_steps": [r["global_step"] for r in train_records],
        "val_loss_per_step": [r["loss"] for r in eval_records],
        "val_loss_global_steps": [r["global_step"] for r in eval_records],
        "per_epoch": epochs,
    }  # fmt: skip
    labels = {
        "framework": "pytorch",
        "versions": common.versions(torch=torch.__version__),
        "scenario": scenario,
        "trial": f"pytorch_{scenario}",
        "description": cfg["description"],
        "config": {"lr": cfg["lr"], "batch": BATCH, "n_train": N_TRAIN, "n_val": N_VAL,
                   "epochs": EPOCHS, "save_interval": SAVE_INTERVAL},
        "hook": {
            "class": "smdebug.pytorch.Hook",
            "save_config": {"save_interval": SAVE_INTERVAL, "losses_collection_save_interval": 1},
            "include_collections": collections,
            "user_collections": (
                {"sigmoid_input": {"include_regex": [r"gate_input_\d+$"]}}
                if scenario == "sigmoid_collection"
                else {"layers": {"include_regex": [LAYER_REGEX]}}
            ),
        },
        "expected": cfg["expected"],
        "evidence": evidence,
    }  # fmt: skip
    common.write_labels(out_dir, labels)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
