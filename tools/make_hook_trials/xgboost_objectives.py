"""XGBoost multi-class (multi:softprob, mlogloss / merror) and regression (reg:squarederror,
rmse) trials written by smdebug 1.0.34's real smdebug.xgboost.Hook. Run inside the "tf" venv:
    python xgboost_objectives.py --scenario multiclass_healthy --out DIR
Same hook set-up as xgboost_trials.py (train_and_label); the evidence is xgboost's own
evals_result, tree dump and predictions, never read back through smdebug.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from xgboost_trials import SEED, train_and_label  # noqa: E402

N_FEATURES, N_CLASSES = 8, 3
MULTI = {"objective": "multi:softprob", "num_class": N_CLASSES,
         "eval_metric": ["mlogloss", "merror"]}  # fmt: skip
REG = {"objective": "reg:squarederror", "eval_metric": ["rmse", "mae"]}


def multiclass(n, rng, priors=(1 / 3, 1 / 3, 1 / 3), noise=0.2, label_noise=0.0, margin=0.0):
    """Rows labelled by the argmax of a +-1 linear teacher (every feature weighs the same), the
    class scores shifted so that the classes come in about ``priors``; ``margin``: only rows
    whose best class beats the second by that much (classes trees learn well)."""
    w = np.sign(np.random.RandomState(7).normal(size=(N_FEATURES, N_CLASSES)))
    x = rng.normal(size=(4 * n if margin else n, N_FEATURES)).astype(np.float32)
    scores = x @ w + noise * rng.normal(size=(len(x), N_CLASSES)) + 3.0 * np.log(priors)
    if margin:
        top = np.sort(scores, axis=1)
        keep = np.flatnonzero(top[:, -1] - top[:, -2] >= margin)[:n]
        x, scores = x[keep], scores[keep]
    y = np.argmax(scores, axis=1)
    if label_noise:
        flip = rng.rand(n) < label_noise
        y[flip] = rng.randint(0, N_CLASSES, size=int(flip.sum()))
    return x, y.astype(np.float32)


def regression(n, rng, noise=0.3):
    w = np.sign(np.random.RandomState(7).normal(size=N_FEATURES))
    x = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    return x, (x @ w + noise * rng.normal(size=n)).astype(np.float32)


def per_class_recall(booster, dval):
    """The validation confusion (rows: true class) and each class's recall at the end."""
    pred = np.argmax(booster.predict(dval), axis=1)
    y = dval.get_label().astype(int)
    m = np.zeros((N_CLASSES, N_CLASSES), dtype=int)
    np.add.at(m, (y, pred), 1)
    recall = [common.fnum(m[c, c] / max(1, m[c].sum())) for c in range(N_CLASSES)]
    return {"final_validation_confusion": m.tolist(), "final_validation_recall": recall}


def cfg(data, expected, description, params, **kw):
    base = dict(data=data, expected=expected, description=description, n_train=2000,
                n_val=600, rounds=30, save_interval=5, params=params)  # fmt: skip
    base.update(kw)
    return base


SCENARIOS = {
    "multiclass_healthy": cfg(
        multiclass, [], "Balanced 3-class classification (multi:softprob, mlogloss and "
        "merror) from a linear teacher that weighs all 8 features the same, rows within 2 "
        "of a class boundary dropped, max_depth=4, eta=0.3, 50 rounds, train and validation "
        "evals: every class is learnt (validation recall per class in the evidence); "
        "train-merror reaches 0 (its floor) by round 20 and stays there, as on easy data.",
        dict(MULTI, max_depth=4, eta=0.3), extra_evidence=per_class_recall, rounds=50,
        train_kw={"margin": 2.0}, val_kw={"margin": 2.0}),
    "multiclass_overfit": cfg(
        multiclass, ["Overtraining"], "90 training rows of 3 classes with 40 % of the labels "
        "redrawn at random, max_depth=10, eta=0.5, min_child_weight=0, lambda=0, 40 rounds: "
        "train-mlogloss falls towards 0 while validation-mlogloss rises.",
        dict(MULTI, max_depth=10, eta=0.5, min_child_weight=0, **{"lambda": 0}),
        n_train=90, rounds=40, save_interval=4, train_kw={"label_noise": 0.4},
        extra_evidence=per_class_recall),
    "multiclass_deep_trees": cfg(
        multiclass, ["TreeDepth"], "3 classes with 40 % of the training labels redrawn, "
        "max_depth=30, min_child_weight=0, gamma=0, lambda=0 on 1000 rows: the trees grow "
        "deep (the measured depth of every tree is in the evidence).",
        dict(MULTI, max_depth=30, eta=0.3, min_child_weight=0, gamma=0, **{"lambda": 0}),
        n_train=1000, n_val=100, rounds=6, save_interval=2, train_kw={"label_noise": 0.4}),
    "multiclass_imbalanced": cfg(
        multiclass, ["ClassImbalance"], "3 classes in about 90/6/4 proportions (class "
        "priors in the teacher's scores), max_depth=3, 12 rounds, 600 validation rows: the "
        "largest class outnumbers the smallest more than 10 times.",
        dict(MULTI, max_depth=3, eta=0.3), n_train=1200, rounds=12, save_interval=3,
        train_kw={"priors": (0.9, 0.06, 0.04)}, val_kw={"priors": (0.9, 0.06, 0.04)},
        extra_evidence=per_class_recall),
    "regression_healthy": cfg(
        regression, [], "Regression (reg:squarederror, rmse and mae) of a linear teacher with "
        "little noise, max_depth=4, eta=0.3, 30 rounds: the error falls every round; labels "
        "and predictions are real numbers (no classes).", dict(REG, max_depth=4, eta=0.3)),
    "regression_flat": cfg(
        regression, ["LossNotDecreasing"], "The same regression with eta=1e-5: every "
        "round's trees move the predictions by a hundred-thousandth, train-rmse and "
        "validation-rmse stay flat for 40 rounds (saved every 2).",
        dict(REG, max_depth=4, eta=1e-5), rounds=40, save_interval=2),
}  # fmt: skip


def run(scenario, out_dir):
    c = SCENARIOS[scenario]
    common.seed_everything(SEED)
    rng = np.random.RandomState(SEED)
    train = c["data"](c["n_train"], rng, **c.get("train_kw", {}))
    val = c["data"](c["n_val"], rng, **c.get("val_kw", {}))
    cfg_out = {k: v for k, v in c.items() if k not in ("data", "expected")}
    classes = c["data"] is multiclass
    train_and_label(scenario, cfg_out, c["expected"], train, val, out_dir, classes=classes)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
