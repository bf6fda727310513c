"""Helpers shared by the per-framework trial scripts (run inside the trial venvs).

Nothing here reads tensor values through smdebug: the evidence in labels.json is measured by the
training scripts themselves.  summarize_trial() only lists what the hook wrote (index files and
the collections file) so that labels.json can say which tensors, modes and steps exist.
"""

import glob
import json
import math
import os
import platform
import random
import shutil
from collections import Counter, defaultdict

import numpy as np

ROUND = 6

# The documented saturation ranges of tanh and sigmoid inputs (what SaturatedActivation uses).
SATURATION_RANGES = {"tanh": (-9.5, 9.5), "sigmoid": (-23.0, 17.0)}

# The rules each Keras / PyTorch scenario of keras_trials.py and pytorch_trials.py should make
# fire (the same scenarios in both frameworks).
NN_EXPECTED = {
    "healthy": [],
    "vanishing_gradients": ["VanishingGradient"],
    "exploding": ["ExplodingTensor"],
    "dead_relu": ["DeadRelu"],
    "saturated": ["SaturatedActivation", "TanhSaturation", "SigmoidSaturation"],
    "poor_init": ["PoorWeightInitialization"],
    "flat_loss": ["LossNotDecreasing", "WeightUpdateRatio"],
    "overfit": ["Overfit"],
}


def teacher_data(n, rng, n_features, n_classes, scale=1.0, noisy=False, margin=0.0):
    """n rows labelled by a fixed tanh-linear teacher (numpy arrays). ``noisy``: random labels
    instead; ``margin``: only rows whose best class beats the second by that much (classes a
    small model learns well)."""
    import numpy as np

    teacher = np.random.RandomState(7).normal(size=(n_features, n_classes)).astype(np.float32)
    kept, count = [], 0
    while count < n:
        x = rng.normal(size=(n if not margin else 4 * n, n_features)).astype(np.float32)
        if margin:
            scores = np.sort(np.tanh(x) @ teacher, axis=1)
            x = x[scores[:, -1] - scores[:, -2] >= margin]
        kept.append(x)
        count += len(x)
    x = np.concatenate(kept)[:n]
    y = np.argmax(np.tanh(x) @ teacher, axis=1)
    if noisy:
        y = rng.randint(0, n_classes, size=n)
    return x * scale, y.astype(np.int64)


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)


def fnum(x):
    """JSON-safe float: NaN/inf become strings."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return 0.0
    return float(f"{x:.{ROUND}g}")


def flist(xs):
    return [fnum(x) for x in xs]


def dead_unit_percent(act):
    """% of units (last axis) whose output is <= 0 for every sample of the batch."""
    a = np.asarray(act).reshape(-1, np.asarray(act).shape[-1])
    return fnum(100.0 * np.mean(np.all(a <= 0, axis=0)))


def zero_element_percent(act):
    a = np.asarray(act)
    return fnum(100.0 * np.mean(a <= 0))


def outside_percent(pre_act, low, high):
    """% of elements of an activation's input outside (low, high)."""
    a = np.asarray(pre_act)
    return fnum(100.0 * np.mean((a <= low) | (a >= high)))


def has_nonfinite(*arrays):
    return bool(any(not np.all(np.isfinite(np.asarray(a))) for a in arrays))


def side_effects(evidence, expected):
    """Rules beyond `expected` that the measured evidence would also support (honest labels)."""
    extra = []
    last = evidence["activations_last_saved_train_step"]["layers"]
    dead = [n for n, v in last.items() if v["kind"] == "relu" and v["dead_units_pct"] > 50]
    # (tanh / sigmoid modules only: an LSTM's or GELU's record holds other measures)
    sat = [
        n
        for n, v in last.items()
        if v["kind"] in ("tanh", "sigmoid")
        and isinstance(v.get("inputs_outside_range_pct"), float)
        and v["inputs_outside_range_pct"] > 50
    ]
    if dead and "DeadRelu" not in expected:
        extra.append(
            {"rule": "DeadRelu", "why": f">50% dead units at the last saved step in {dead}"}
        )
    if sat and not any("Saturat" in e for e in expected):
        extra.append(
            {
                "rule": "SaturatedActivation",
                "why": f">50% of activation inputs outside range at the last saved step in {sat}",
            }
        )
    if evidence["nan_or_inf_seen"] and "ExplodingTensor" not in expected:
        extra.append({"rule": "ExplodingTensor", "why": "NaN/inf seen"})
    return extra


def versions(**extra):
    import smdebug

    v = {
        "python": platform.python_version(),
        "smdebug": smdebug.__version__,
        "numpy": np.__version__,
    }
    v.update(extra)
    return v


def fresh_dir(path):
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


def summarize_trial(path):
    """List what the hook wrote: steps per mode, tensor names, collections, duplicates."""
    steps = []  # (global step, mode, mode_step, [names])
    for f in sorted(glob.glob(os.path.join(path, "index", "*", "*.json"))):
        with open(f) as fh:
            d = json.load(fh)
        gstep = int(os.path.basename(f).split("_")[0])
        names = [e["tensorname"] for e in d.get("tensor_payload", [])]
        names += [e["tensorname"] for e in d.get("shape_payload", [])]
        steps.append((gstep, d["meta"]["mode"], int(d["meta"]["mode_step"]), names))
    modes = defaultdict(lambda: {"global_steps": [], "mode_steps": []})
    tensor_steps = defaultdict(list)
    duplicates = []
    for gstep, mode, mstep, names in steps:
        modes[mode]["global_steps"].append(gstep)
        modes[mode]["mode_steps"].append(mstep)
        for n in set(names):
            tensor_steps[n].append(gstep)
        dup = sorted(n for n, c in Counter(names).items() if c > 1)
        if dup:
            duplicates.append({"global_step": gstep, "mode": mode, "names": dup})
    coll_files = glob.glob(os.path.join(path, "collections", "000000000", "*_collections.json"))
    collections = {}
    in_some_collection = set()
    if coll_files:
        with open(coll_files[0]) as fh:
            cj = json.load(fh)["collections"]
        for name, c in sorted(cj.items()):
            collections[name] = {
                "include_regex": c.get("include_regex", []),
                "tensor_names": c.get("tensor_names", []),
                "save_config": c.get("save_config"),
            }
            in_some_collection.update(c.get("tensor_names", []))
    all_names = sorted(tensor_steps)
    return {
        "modes": {m: v for m, v in sorted(modes.items())},
        "step_layout": [f"{g}:{m}:{ms}" for g, m, ms, _ in steps],
        "tensor_names": all_names,
        "tensor_global_steps": {n: sorted(s) for n, s in sorted(tensor_steps.items())},
        "collections": collections,
        "tensors_outside_any_collection": sorted(set(all_names) - in_some_collection),
        "index_files_with_duplicate_entries": duplicates,
        "training_job_end_ts": os.path.exists(os.path.join(path, "training_job_end.ts")),
    }


def write_labels(path, labels):
    labels = dict(labels)
    labels["written_by_hook"] = summarize_trial(path)
    with open(os.path.join(path, "labels.json"), "w") as fh:
        json.dump(labels, fh, indent=1, sort_keys=False)
        fh.write("\n")
    # the hook's transient claim file is not part of a trial
    claim = os.path.join(path, "claim.smd")
    if os.path.exists(claim):
        os.remove(claim)


def scenario_main(scenarios, run):
    """The command line of a framework's script: ``--scenario NAME --out DIR``."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True, choices=sorted(scenarios))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    run(args.scenario, args.out)
