"""Ask our Trial the questions the golden files record, and encode answers as they do.

``tests/fixtures/smdebug_1_0_34/golden/<scenario>.query.json`` holds what smdebug 1.0.34
answered on each fixture trial. The keys of each golden field name the arguments of the call
(steps, modes, regexes …); the functions here make the same calls on our implementation and
encode the results the same way: arrays as ``{dtype, shape, sha256, values (size <= 8)}``,
exceptions as ``{"error": <class name>}``, StepState as its name.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluator.modes import ModeKeys

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "smdebug_1_0_34"
DATA = FIXTURES / "data"
GOLDEN = FIXTURES / "golden"
SCENARIOS = sorted(p.name.split(".")[0] for p in GOLDEN.glob("*.query.json"))
MISSING_TENSOR = "__no_such_tensor__"


def load_golden(scenario: str, kind: str = "query") -> dict[str, Any]:
    return json.loads((GOLDEN / f"{scenario}.{kind}.json").read_text())


def _scalar(x: Any) -> Any:
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
    if isinstance(x, complex):
        return [_scalar(x.real), _scalar(x.imag)]
    return x


def encode_array(value: Any) -> dict[str, Any]:
    a = np.asarray(value)
    out: dict[str, Any] = {
        "dtype": a.dtype.str,
        "shape": list(a.shape),
        "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(),
    }
    if a.size <= 8:
        out["values"] = [_scalar(x) for x in a.ravel().tolist()]
    return out


def call(fn: Callable[[], Any], encode: Callable[[Any], Any] = lambda x: x) -> Any:
    try:
        result = fn()
    except Exception as e:  # the golden files record the class name of what was raised
        return {"error": type(e).__name__}
    return encode(result)


def _names(steps: Any) -> Any:
    return list(steps)


# ------------------------------------------------------------------------------------ trial


def probe_trial(trial: Any, golden: dict[str, Any]) -> dict[str, Any]:
    """Our answers to every trial-level field of ``golden['trial']``, in a stable call order."""
    g = golden["trial"]
    out: dict[str, Any] = {}
    out["num_workers"] = trial.num_workers
    out["workers"] = call(trial.workers)
    out["collections"] = {
        n: c.to_json_dict() for n, c in trial.collections().items() if n in g["collections"]
    }
    out["tensor_names"] = call(trial.tensor_names)
    out["steps"] = call(trial.steps)
    out["steps_show_incomplete"] = call(lambda: trial.steps(show_incomplete_steps=True))
    out["steps_by_mode"] = {
        m: call(lambda m=m: trial.steps(mode=ModeKeys[m])) for m in g["steps_by_mode"]
    }
    out["steps_by_mode_show_incomplete"] = {
        m: call(lambda m=m: trial.steps(mode=ModeKeys[m], show_incomplete_steps=True))
        for m in g["steps_by_mode_show_incomplete"]
    }
    # The reference script recorded mode names sorted (TRAIN is written first in loss_flat, yet
    # the golden list starts with EVAL); modes() itself keeps first-seen order, as smdebug.
    out["modes"] = sorted(m.name for m in trial.modes())
    out["mode_modestep"] = {
        s: call(
            lambda s=s: [
                x.name if isinstance(x, ModeKeys) else x for x in trial.mode_modestep(int(s))
            ]
        )
        for s in g["mode_modestep"]
    }
    out["global_step"] = {
        m: {s: call(lambda m=m, s=s: trial.global_step(ModeKeys[m], int(s))) for s in steps}
        for m, steps in g["global_step"].items()
    }
    out["has_passed_step"] = {
        m: {
            s: call(lambda m=m, s=s: trial.has_passed_step(int(s), mode=ModeKeys[m]).name)
            for s in steps
        }
        for m, steps in g["has_passed_step"].items()
    }
    out["tensor_names_by_step"] = {
        s: call(lambda s=s: trial.tensor_names(step=int(s))) for s in g["tensor_names_by_step"]
    }
    out["tensor_names_by_mode_step"] = {
        m: {
            s: call(lambda m=m, s=s: trial.tensor_names(step=int(s), mode=ModeKeys[m]))
            for s in steps
        }
        for m, steps in g["tensor_names_by_mode_step"].items()
    }
    out["tensor_names_by_regex"] = {
        r: call(lambda r=r: trial.tensor_names(regex=r)) for r in g["tensor_names_by_regex"]
    }
    out["tensor_names_by_regex_list"] = call(
        lambda: trial.tensor_names(regex=["^weights/", "^biases/"])
    )
    out["tensor_names_by_collection"] = {
        c: call(lambda c=c: trial.tensor_names(collection=c))
        for c in g["tensor_names_by_collection"]
    }
    out["tensor_names_regex_and_collection"] = call(
        lambda: trial.tensor_names(regex="loss", collection="losses")
    )
    out["tensor_missing"] = call(lambda: trial.tensor(MISSING_TENSOR))
    out["has_tensor_missing"] = call(lambda: trial.has_tensor(MISSING_TENSOR))
    out["has_training_ended"] = trial.training_ended()
    out["loaded_all_steps"] = trial.loaded_all_steps
    out["last_complete_step"] = trial.last_complete_step
    return out


# ------------------------------------------------------------------------------------ tensors


def _reduction_key(key: tuple[str, bool]) -> str:
    name, is_abs = key
    return f"{name}|{'abs' if is_abs else 'raw'}"


def probe_tensor(trial: Any, name: str, golden: dict[str, Any]) -> dict[str, Any]:
    """Our answers to every field the golden file records for one tensor."""
    t = trial.tensor(name)
    out: dict[str, Any] = {}
    out["original_name"] = t.original_name
    out["steps"] = call(t.steps)
    out["steps_show_incomplete"] = call(lambda: t.steps(show_incomplete_steps=True))
    out["steps_by_mode"] = {
        m: call(lambda m=m: t.steps(mode=ModeKeys[m])) for m in golden["steps_by_mode"]
    }
    out["steps_by_mode_show_incomplete"] = {
        m: call(lambda m=m: t.steps(mode=ModeKeys[m], show_incomplete_steps=True))
        for m in golden["steps_by_mode_show_incomplete"]
    }
    out["values"] = {
        s: {
            w: call(
                lambda s=s, w=w: t.value(int(s), worker=None if w == "_default" else w),
                encode_array,
            )
            for w in per_worker
        }
        for s, per_worker in golden["values"].items()
    }
    out["values_by_mode"] = {
        m: {
            s: call(lambda m=m, s=s: t.value(int(s), mode=ModeKeys[m]), encode_array) for s in steps
        }
        for m, steps in golden["values_by_mode"].items()
    }
    out["shapes"] = {s: call(lambda s=s: list(t.shape(int(s)))) for s in golden["shapes"]}
    out["workers_by_step"] = {
        s: call(lambda s=s: t.workers(int(s))) for s in golden["workers_by_step"]
    }
    out["prev_steps"] = {k: call(lambda k=k: _prev_steps(t, k)) for k in golden["prev_steps"]}
    out["reduction_values"] = {
        s: {k: call(lambda s=s, k=k: _reduction(t, int(s), k), encode_array) for k in reds}
        if isinstance(reds, dict) and "error" not in reds
        else call(lambda s=s: t.reduction_values(int(s)))
        for s, reds in golden["reduction_values"].items()
    }
    out["reduction_values_saved"] = {
        s: call(lambda s=s: sorted(_reduction_key(k) for k in t.reduction_values(int(s))))
        for s in golden["reduction_values_saved"]
    }
    out["errors"] = probe_errors(t)
    return out


def _prev_steps(t: Any, key: str) -> list[int]:
    step, _, which = key.partition("|")
    return t.prev_steps(int(step)) if which == "all" else t.prev_steps(int(step), n=3)


def _reduction(t: Any, step: int, key: str) -> Any:
    name, _, kind = key.partition("|")
    return t.reduction_value(step, name, abs=(kind == "abs"))


def probe_errors(t: Any) -> dict[str, Any]:
    """The error probes: calls just past the tensor's last step, a bad worker, a bad name."""
    steps = t.steps(show_incomplete_steps=True)
    first, last = steps[0], steps[-1]
    return {
        "value_after_last": call(lambda: t.value(last + 1), encode_array),
        "value_far_after_last": call(lambda: t.value(last + 100), encode_array),
        "shape_after_last": call(lambda: list(t.shape(last + 1))),
        "value_bad_worker": call(lambda: t.value(first, worker="no_such_worker"), encode_array),
        "reduction_bad_name": call(
            lambda: t.reduction_value(first, "no_such_reduction"), encode_array
        ),
        "step_method": call(lambda: t.step(first)),
    }
