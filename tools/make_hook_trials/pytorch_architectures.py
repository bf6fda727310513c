"""PyTorch architectures, written by smdebug 1.0.34's real smdebug.pytorch.Hook: a small CNN,
a ResNet-style block with BatchNorm, an LSTM and a transformer encoder block, each healthy and
with the fault it typically shows.

Run inside the "torch" venv:  python pytorch_architectures.py --scenario cnn_healthy --out DIR
(make.py runs every scenario). Same hook set-up as pytorch_idioms.py (a user ``layers``
collection over every module input/output, losses every step, the rest every
``save_interval`` mode steps). The evidence is measured here with plain torch forward hooks
(one record per CALL of an activation module) and autograd, never read back through smdebug.

* ``cnn_*``: Conv2d(1,4,3,pad 1)-ReLU(relu1)-MaxPool-Conv2d(4,8,3,pad 1)-ReLU(relu2)-
  AdaptiveAvgPool-Linear on 6x6 one-channel images whose class is the row band holding a
  bright bar. ``dead_relu``: conv biases -10; ``exploding``: weights N(0, 3^2), inputs x10,
  SGD lr=50.
* ``resnet_*``: a stem conv and two residual blocks (conv-BN-relu-conv-BN, +skip, relu: one
  ``nn.ReLU(inplace=True)`` per block called twice). ``dead_relu``: bn1's shift (beta) -10 in
  both blocks: each block's first ReLU call is dead, the second (after the skip) is not.
* ``lstm_*``: nn.LSTM(4, 16, batch_first) over 12 steps, the last hidden state into a Linear.
  ``vanishing``: gate biases 50 in all: every gate saturated, gradients through them vanish.
* ``transformer_*``: a pre-LN encoder block (LayerNorm, nn.MultiheadAttention, LayerNorm,
  Linear-GELU-Linear) over 8 tokens, mean-pooled into a Linear. ``stalled``: SGD lr=1e-6:
  the loss never really falls.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from pytorch_models import CNN, IMG, N_CLASSES, SEQ, SEQ_FEATURES, LSTMNet, ResNet, Transformer  # noqa: E402
from smdebug import modes  # noqa: E402
from smdebug.core.save_config import SaveConfig  # noqa: E402
from smdebug.pytorch import Hook  # noqa: E402

SEED = 1234
TANH_RANGE, SIGMOID_RANGE = (-9.5, 9.5), (-23.0, 17.0)
LAYER_REGEX = r"_(input|output)_\d+$"
COLLECTIONS = ["weights", "biases", "gradients", "losses", "layers"]


def images(n, rng, scale=1.0):
    """6x6 images: the class is the band of rows (top/middle/bottom) holding a bright bar."""
    y = rng.randint(0, N_CLASSES, size=n)
    x = 0.3 * rng.normal(size=(n, 1, IMG, IMG))
    rows = y * 2 + rng.randint(0, 2, size=n)
    x[np.arange(n), 0, rows, :] += 2.0
    return (x * scale).astype(np.float32), y.astype(np.int64)


def sequences(n, rng, scale=1.0):
    """12 steps of 4 features: the class is which of the first 3 features has the largest sum
    over time (the 4th is noise)."""
    x = rng.normal(size=(n, SEQ, SEQ_FEATURES))
    y = rng.randint(0, N_CLASSES, size=n)
    x[np.arange(n), :, y] += 0.8
    return (x * scale).astype(np.float32), y.astype(np.int64)


def _fill(model, std):
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)


def _saturated_lstm(m):
    with torch.no_grad():
        m.lstm.bias_ih_l0.fill_(25.0)
        m.lstm.bias_hh_l0.fill_(25.0)


def _dead_cnn(m):
    with torch.no_grad():
        m.conv1.bias.fill_(-10.0)
        m.conv2.bias.fill_(-10.0)


def _dead_resnet(m):
    with torch.no_grad():
        for block in (m.layer1, m.layer2):
            block.bn1.bias.fill_(-10.0)  # beta: every first-call ReLU input is about -10


def cfg(model, data, expected, description, **kw):
    base = dict(model=model, data=data, expected=expected, description=description, lr=0.01,
                opt="adam", epochs=4, batch=16, n_train=128, n_val=32, save_interval=4,
                input_scale=1.0, init=None, loss="ce")  # fmt: skip
    base.update(kw)
    return base


SCENARIOS = {
    "cnn_healthy": cfg(CNN, images, [], "CNN conv1-relu1-pool-conv2-relu2-gap-fc on 6x6 images "
                       "whose class is the row band of a bright bar, PyTorch default init, Adam "
                       "lr=0.01, 4 epochs of 8 batches of 16, a 2-batch validation pass per "
                       "epoch: the loss falls, nothing is wrong.", save_interval=8),
    "cnn_dead_relu": cfg(CNN, images, ["DeadRelu"], "The CNN with both conv biases -10: every "
                         "unit of relu1 and relu2 outputs 0 for every sample and stays dead "
                         "(zero gradient), Adam lr=0.01.", init=_dead_cnn, save_interval=8),
    "cnn_exploding": cfg(CNN, images, ["ExplodingTensor"], "The CNN with every weight "
                         "N(0, 3^2), inputs x10, MSELoss on one-hot targets, SGD lr=50: "
                         "weights, gradients and the loss overflow to inf and NaN.",
                         init=lambda m: _fill(m, 3.0), opt="sgd", lr=50.0, input_scale=10.0,
                         epochs=2, loss="mse"),
    "resnet_healthy": cfg(ResNet, images, [], "ResNet-style net: stem conv (2 channels), "
                          "two residual blocks (conv-BN-relu-conv-BN, +skip, relu; one "
                          "nn.ReLU(inplace=True) per block called twice: "
                          "layer1.relu_output_0/_1), flatten, fc; default init, Adam lr=0.01: "
                          "the loss falls, nothing is wrong.", save_interval=16),
    "resnet_dead_relu": cfg(ResNet, images, ["DeadRelu"], "The ResNet-style net with bn1's "
                            "shift (beta) -10 in both blocks: the first call of each block's "
                            "shared ReLU (layer1.relu_output_0, layer2.relu_output_0) is 100 % "
                            "dead, the second (after the skip) is not. Adam lr=0.01.",
                            init=_dead_resnet, save_interval=16),
    "lstm_healthy": cfg(LSTMNet, sequences, [], "nn.LSTM(4, 16, batch_first) over 12 steps, "
                        "the last hidden state into fc; the class is the feature with the "
                        "largest sum; default init, Adam lr=0.01: the loss falls, nothing is "
                        "wrong."),
    "lstm_vanishing": cfg(LSTMNet, sequences, ["VanishingGradient"], "The LSTM with both "
                          "bias vectors 25 (every gate pre-activation about 50): the input, "
                          "forget and output gates sit at 1 and the cell candidate at tanh's "
                          "1 for every step and sample; the gradients of the LSTM's weights "
                          "and biases vanish (< 1e-7 from the first step). SGD lr=0.01.",
                          init=_saturated_lstm, opt="sgd"),
    "transformer_healthy": cfg(Transformer, sequences, [], "A pre-LN transformer encoder block "
                               "(ln1, attn = nn.MultiheadAttention(8, 2), ln2, ff1-GELU(gelu)"
                               "-ff2, residuals) over 12 tokens, mean-pooled into head; Adam "
                               "lr=0.005: the loss falls, nothing is wrong.", lr=0.005,
                               save_interval=16),
    "transformer_stalled": cfg(Transformer, sequences, ["LossNotDecreasing"], "The transformer "
                               "trained with SGD lr=1e-6 on mini-batches of 16 for 8 epochs: "
                               "the loss never falls more than batch noise.", opt="sgd",
                               lr=1e-6, epochs=8, save_interval=32),
}  # fmt: skip


class CallProbe:
    """Plain torch forward hooks: inputs/outputs of every call of each activation module and
    the LSTM's gate pre-activations (recomputed from its weights and outputs)."""

    KINDS = {nn.ReLU: "relu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.GELU: "gelu"}

    def __init__(self, model):
        self.calls, self.kinds = {}, {}
        for name, mod in model.named_modules():
            kind = "lstm" if isinstance(mod, nn.LSTM) else self.KINDS.get(type(mod))
            if kind:
                self.kinds[name] = kind
                mod.register_forward_pre_hook(self._pre(name))
                mod.register_forward_hook(self._post(name, mod))

    def reset(self):
        self.calls = {}

    def _pre(self, name):
        def hook(mod, inputs):  # before an inplace ReLU overwrites its input
            self.calls.setdefault(name, []).append([inputs[0].detach().numpy().copy(), None])

        return hook

    def _post(self, name, mod):
        def hook(m, inputs, output):
            if isinstance(mod, nn.LSTM):
                self.calls[name][-1][1] = lstm_gates(mod, inputs[0], output[0])
            else:
                self.calls[name][-1][1] = output.detach().numpy().copy()

        return hook

    def stats(self):
        out = {}
        for name, calls in self.calls.items():
            kind = self.kinds[name]
            for i, (inp, outp) in enumerate(calls):
                s = {"kind": kind, "call": i}
                if kind == "lstm":
                    s.update(outp, nonfinite=common.has_nonfinite(inp))
                    out[name] = s
                    continue
                s["nonfinite"] = common.has_nonfinite(inp, outp)
                if kind == "relu":
                    s["dead_units_pct"] = unit_dead_percent(outp)
                elif kind == "gelu":
                    s["negative_inputs_pct"] = common.fnum(100.0 * np.mean(inp < 0))
                else:
                    lo, hi = TANH_RANGE if kind == "tanh" else SIGMOID_RANGE
                    s["inputs_outside_range_pct"] = common.outside_percent(inp, lo, hi)
                out[f"{name}[{i}]" if i else name] = s
        return out


def unit_dead_percent(act):
    """% of units (every output element but the batch axis: a conv's channel x position) whose
    output is <= 0 for every sample of the batch."""
    a = np.asarray(act).reshape(len(act), -1)
    return common.fnum(100.0 * np.mean(np.all(a <= 0, axis=0)))


def lstm_gates(lstm, x, out):
    """% of the LSTM's gate pre-activations outside the saturation ranges (sigmoid gates i, f,
    o: (-23, 17) and the looser |x| > 10; cell candidate g: tanh's (-9.5, 9.5))."""
    with torch.no_grad():
        h_prev = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], dim=1)
        pre = (x @ lstm.weight_ih_l0.T + lstm.bias_ih_l0 + h_prev @ lstm.weight_hh_l0.T
               + lstm.bias_hh_l0).numpy()  # fmt: skip
    i, f, g, o = np.split(pre, 4, axis=-1)
    sig = np.concatenate([i, f, o], axis=-1)
    return {
        "sigmoid_gates_outside_range_pct": common.outside_percent(sig, *SIGMOID_RANGE),
        "sigmoid_gates_abs_over_10_pct": common.fnum(100.0 * np.mean(np.abs(sig) > 10)),
        "cell_candidate_outside_range_pct": common.outside_percent(g, *TANH_RANGE),
    }


def run(scenario, out_dir):
    c = SCENARIOS[scenario]
    common.seed_everything(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    rng = np.random.RandomState(SEED)
    x_train, y_train = (torch.from_numpy(a) for a in c["data"](c["n_train"], rng, c["input_scale"]))
    x_val, y_val = (torch.from_numpy(a) for a in c["data"](c["n_val"], rng, c["input_scale"]))
    model = c["model"]()
    if c["init"]:
        c["init"](model)
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    mse = c["loss"] == "mse"
    ce = nn.CrossEntropyLoss()
    loss_fn = nn.MSELoss() if mse else ce

    def target(yb):
        return nn.functional.one_hot(yb, N_CLASSES).float() if mse else yb

    opt_cls = torch.optim.Adam if c["opt"] == "adam" else torch.optim.SGD
    opt = opt_cls(model.parameters(), lr=c["lr"])

    common.fresh_dir(out_dir)
    si = c["save_interval"]
    hook = Hook(out_dir=out_dir, save_config=SaveConfig(save_interval=si),
                include_collections=COLLECTIONS)  # fmt: skip
    hook.get_collection("losses").save_config = SaveConfig(save_interval=1)
    hook.get_collection("layers").include(LAYER_REGEX)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    probe = CallProbe(model)

    gstep, train_records, eval_records, epochs = -1, [], [], []
    bs = c["batch"]
    for epoch in range(c["epochs"]):
        hook.set_mode(modes.TRAIN)
        model.train()
        perm = torch.from_numpy(rng.permutation(c["n_train"]))
        losses = []
        for i in range(0, c["n_train"], bs):
            xb, yb = x_train[perm[i : i + bs]], y_train[perm[i : i + bs]]
            gstep += 1
            probe.reset()
            opt.zero_grad()
            loss = loss_fn(model(xb), target(yb))
            loss.backward()
            grads = {n: common.fnum(p.grad.abs().mean()) if p.grad is not None else None
                     for n, p in model.named_parameters()}  # fmt: skip
            train_records.append({
                "global_step": gstep, "mode_step": len(train_records),
                "loss": common.fnum(loss.item()), "grad_mean_abs": grads,
                "activations": probe.stats(),
                "nonfinite_weights": any(not torch.isfinite(p).all().item()
                                         for p in model.parameters()),
            })  # fmt: skip
            opt.step()
            losses.append(loss.item())
        hook.set_mode(modes.EVAL)
        model.eval()
        vlosses, correct = [], 0
        with torch.no_grad():
            for i in range(0, c["n_val"], bs):
                xb, yb = x_val[i : i + bs], y_val[i : i + bs]
                gstep += 1
                out = model(xb)
                vloss = loss_fn(out, target(yb))
                vlosses.append(vloss.item())
                correct += int((out.argmax(1) == yb).sum())
                eval_records.append({"global_step": gstep, "mode_step": len(eval_records),
                                     "loss": common.fnum(vloss.item())})  # fmt: skip
        epochs.append({"epoch": epoch, "train_loss_mean": common.fnum(np.mean(losses)),
                       "val_loss_mean": common.fnum(np.mean(vlosses)),
                       "val_accuracy": common.fnum(correct / c["n_val"])})  # fmt: skip
    hook.close()

    saved = [r for r in train_records if r["mode_step"] % si == 0]
    grad_means = {}
    for n in initial:
        vals = [r["grad_mean_abs"][n] for r in train_records if r["grad_mean_abs"][n] is not None]
        finite = [v for v in vals if isinstance(v, float)]
        grad_means[n] = {"first_step": vals[0] if vals else None,
                         "last_step": vals[-1] if vals else None,
                         "min_finite": min(finite) if finite else None,
                         "max_finite": max(finite) if finite else None}  # fmt: skip
    changes = {n: common.fnum((p.detach() - initial[n]).abs().max())
               for n, p in model.named_parameters()}  # fmt: skip
    nan_steps = [r["global_step"] for r in train_records
                 if r["loss"] in ("nan", "inf", "-inf") or r["nonfinite_weights"]]  # fmt: skip
    evidence = {
        "measured_by": "the training script (torch forward hooks, one record per call; "
        "autograd), not smdebug",
        "dead_relu_definition": "unit dead = output <= 0 for every sample of the batch (a "
        "conv's unit: one channel at one position)",
        "saturation_ranges": {"tanh": TANH_RANGE, "sigmoid": SIGMOID_RANGE},
        "activations_first_saved_train_step": {"global_step": saved[0]["global_step"],
                                               "layers": saved[0]["activations"]},
        "activations_last_saved_train_step": {"global_step": saved[-1]["global_step"],
                                              "layers": saved[-1]["activations"]},
        "gradient_mean_abs_per_parameter": grad_means,
        "initial_weight_variance": {n: common.fnum(initial[n].var()) for n in initial
                                    if n.endswith("weight") and initial[n].numel() > 1},
        "max_abs_weight_change": changes,
        "weights_changed": any(v != 0.0 for v in changes.values()),
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
        "description": c["description"],
        "config": {k: c[k] for k in ("lr", "opt", "loss", "batch", "n_train", "n_val", "epochs",
                                     "save_interval", "input_scale")},
        "hook": {"class": "smdebug.pytorch.Hook",
                 "save_config": {"save_interval": si, "losses_collection_save_interval": 1},
                 "include_collections": COLLECTIONS,
                 "user_collections": {"layers": {"include_regex": [LAYER_REGEX]}}},
        "expected": c["expected"],
        "evidence": evidence,
    }  # fmt: skip
    labels["also_supported_by_evidence"] = common.side_effects(evidence, c["expected"])
    common.write_labels(out_dir, labels)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
