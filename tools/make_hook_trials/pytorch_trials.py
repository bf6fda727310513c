"""PyTorch trials written by smdebug 1.0.34's real smdebug.pytorch.Hook.

Run inside the "torch" venv:  python pytorch_trials.py --scenario healthy --out DIR
(the models and scenarios are in pytorch_scenarios.py; this script trains and measures)
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
from pytorch_scenarios import EXPECTED, N_CLASSES, N_FEATURES, SCENARIOS, build_model  # noqa: E402
from smdebug import modes  # noqa: E402
from smdebug.core.save_config import SaveConfig  # noqa: E402
from smdebug.pytorch import Hook  # noqa: E402

SEED = 1234
TANH_RANGE = (-9.5, 9.5)
SIGMOID_RANGE = (-23.0, 17.0)
LAYER_REGEX = r"_(input|output)_\d+$"
LOSS_SAVE_INTERVAL = 1
INCLUDE_COLLECTIONS = ["weights", "biases", "gradients", "losses", "layers"]


def make_data(n, rng, scale=1.0, noisy=False, margin=0.0):
    x, y = common.teacher_data(n, rng, N_FEATURES, N_CLASSES, scale, noisy, margin)
    return torch.from_numpy(x), torch.from_numpy(y)


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
