"""XGBoost trials written by smdebug 1.0.34's real smdebug.xgboost.Hook (a callback of
xgboost.train).  Run inside the "tf" venv (it holds xgboost 1.7.6 too):
    python xgboost_trials.py --scenario healthy --out DIR
"""

import os
import sys

import numpy as np
import xgboost as xgb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from smdebug.core.save_config import SaveConfig  # noqa: E402
from smdebug.xgboost import Hook  # noqa: E402

SEED = 1234
COLLECTIONS = [
    "hyperparameters",
    "metrics",
    "losses",
    "predictions",
    "labels",
    "feature_importance",
    "average_shap",
    "trees",
]

SCENARIOS = {
    "healthy": dict(
        n_train=4000,
        n_val=1000,
        n_features=6,
        pos_rate=0.5,
        rounds=30,
        save_interval=5,
        score_noise=0.1,
        even_teacher=True,
        params={
            "objective": "binary:logistic",
            "max_depth": 4,
            "eta": 0.3,
            "eval_metric": ["logloss", "error", "auc"],
        },
        full_shap=True,
        n_shap=40,
        description="Balanced binary classification (50/50) from a linear teacher with little "
        "noise that weighs every feature the same, max_depth=4, eta=0.3, 30 rounds, train and validation evals: the model learns "
        "both classes. Also saves full_shap (on 40 training rows) to show its layout.",
    ),
    "imbalanced": dict(
        n_train=400,
        n_val=600,
        n_features=6,
        pos_rate=0.05,
        rounds=12,
        save_interval=3,
        params={
            "objective": "binary:logistic",
            "max_depth": 3,
            "eta": 0.3,
            "eval_metric": ["logloss", "error", "auc"],
        },
        description="About 95% of the labels are class 0 (threshold on a noisy score), "
        "max_depth=3, 12 rounds, 600 validation samples (ClassImbalance waits for 500 labels "
        "by default): ClassImbalance territory.",
    ),
    "deep_trees": dict(
        n_train=1000,
        n_val=100,
        n_features=6,
        pos_rate=0.5,
        rounds=6,
        save_interval=2,
        label_noise=0.4,
        params={
            "objective": "binary:logistic",
            "max_depth": 30,
            "eta": 0.3,
            "min_child_weight": 0,
            "gamma": 0,
            "lambda": 0,
            "eval_metric": ["logloss", "error"],
        },
        description="40% label noise on 1000 rows of continuous features, max_depth=30, min_child_weight=0, "
        "lambda=0: trees grow deep (the measured max depth is in the evidence).",
    ),
    "overfit": dict(
        n_train=60,
        n_val=200,
        n_features=6,
        pos_rate=0.5,
        rounds=40,
        save_interval=4,
        label_noise=0.35,
        params={
            "objective": "binary:logistic",
            "max_depth": 10,
            "eta": 0.5,
            "min_child_weight": 0,
            "lambda": 0,
            "eval_metric": ["logloss", "error"],
        },
        description="60 noisy training rows (35% flipped labels), max_depth=10, eta=0.5, 40 "
        "rounds: train-logloss falls to ~0 while validation-logloss rises.",
    ),
}

# XGBoost saves every step as GLOBAL, with train-* and validation-* metrics under different
# names: Overfit (one loss compared across TRAIN and EVAL phases) has nothing to compare, and
# a healthy booster's validation-logloss is often far above its train-logloss anyway. The rule
# for a validation loss that rises while training improves is Overtraining.
EXPECTED = {
    "healthy": [],
    "imbalanced": ["ClassImbalance"],
    "deep_trees": ["TreeDepth"],
    "overfit": ["Overtraining"],
}


def make_data(n, n_features, pos_rate, rng, label_noise=0.0, score_noise=0.5, even=False):
    """Rows labelled by a linear teacher; ``even``: every feature weighs the same (no few
    features dominate the model's importance)."""
    x = rng.normal(size=(n, n_features)).astype(np.float32)
    w = np.random.RandomState(7).normal(size=n_features)
    if even:
        w = np.sign(w)
    score = x @ w + score_noise * rng.normal(size=n)
    y = (score > np.quantile(score, 1.0 - pos_rate)).astype(np.float32)
    if label_noise:
        flip = rng.rand(n) < label_noise
        y[flip] = 1.0 - y[flip]
    return x, y


def tree_depths(booster):
    depths = []
    for dump in booster.get_dump():
        d = 0
        for line in dump.splitlines():
            d = max(d, len(line) - len(line.lstrip("\t")))
        depths.append(d)
    return depths


def run(scenario, out_dir):
    cfg = SCENARIOS[scenario]
    common.seed_everything(SEED)
    rng = np.random.RandomState(SEED)
    noise, even = cfg.get("score_noise", 0.5), cfg.get("even_teacher", False)
    xt, yt = make_data(
        cfg["n_train"],
        cfg["n_features"],
        cfg["pos_rate"],
        rng,
        cfg.get("label_noise", 0.0),
        score_noise=noise,
        even=even,
    )
    xv, yv = make_data(
        cfg["n_val"], cfg["n_features"], cfg["pos_rate"], rng, score_noise=noise, even=even
    )
    train_and_label(scenario, cfg, EXPECTED[scenario], (xt, yt), (xv, yv), out_dir)


def train_and_label(scenario, cfg, expected, train, val, out_dir, classes=True):
    """Train with the hook on (x, y) ``train`` / ``val`` and write labels.json; ``classes``:
    the labels are classes (their distributions are evidence)."""
    (xt, yt), (xv, yv) = train, val
    dtrain = xgb.DMatrix(xt, label=yt)
    dval = xgb.DMatrix(xv, label=yv)
    params = dict(cfg["params"], seed=SEED, nthread=1)
    collections = list(COLLECTIONS)
    if cfg.get("full_shap"):
        collections.append("full_shap")
    # average_shap needs train_data; keep the SHAP matrix tiny
    shap_data = xgb.DMatrix(xt[: cfg.get("n_shap", 40)], label=yt[: cfg.get("n_shap", 40)])
    common.fresh_dir(out_dir)
    hook = Hook(
        out_dir=out_dir,
        save_config=SaveConfig(save_interval=cfg["save_interval"]),
        include_collections=collections,
        hyperparameters=params,
        train_data=shap_data,
        validation_data=dval,
    )
    evals_result = {}
    booster = xgb.train(
        params,
        dtrain,
        num_boost_round=cfg["rounds"],
        evals=[(dtrain, "train"), (dval, "validation")],
        evals_result=evals_result,
        callbacks=[hook],
        verbose_eval=False,
    )
    hook.close()
    depths = tree_depths(booster)
    evidence = {
        "measured_by": "the training script (xgboost's own evals_result and tree dump), not smdebug",
        "tree_depth_per_round": depths,
        "max_tree_depth": max(depths),
        "evals_per_round": {
            f"{ds}-{m}": common.flist(v) for ds, ms in evals_result.items() for m, v in ms.items()
        },
        "final_validation_predictions_mean": common.fnum(booster.predict(dval).mean()),
    }
    if classes:
        evidence["train_class_distribution"] = {
            str(int(k)): int(v) for k, v in zip(*np.unique(yt, return_counts=True))
        }
        evidence["validation_class_distribution"] = {
            str(int(k)): int(v) for k, v in zip(*np.unique(yv, return_counts=True))
        }
        evidence["train_positive_fraction"] = common.fnum(yt.mean())
    evidence.update(cfg.get("extra_evidence", lambda b, d: {})(booster, dval))
    labels = {
        "framework": "xgboost",
        "versions": common.versions(xgboost=xgb.__version__),
        "scenario": scenario,
        "trial": f"xgboost_{scenario}",
        "description": cfg["description"],
        "config": {k: v for k, v in cfg.items() if k not in ("description", "extra_evidence")},
        "hook": {
            "class": "smdebug.xgboost.Hook",
            "save_config": {"save_interval": cfg["save_interval"]},
            "include_collections": collections,
            "arguments": "hyperparameters=params, train_data=<first rows of the training set, "
            "for SHAP>, validation_data=<validation DMatrix, for labels and "
            "predictions>",
            "calls": [
                "xgboost.train(..., evals=[(dtrain,'train'),(dval,'validation')], "
                "callbacks=[hook])",
                "hook.close()",
            ],
        },
        "expected": expected,
        "evidence": evidence,
    }
    common.write_labels(out_dir, labels)


if __name__ == "__main__":
    common.scenario_main(SCENARIOS, run)
