"""TreeDepth: depth from the largest node id of trees/Node, the 2019 intent, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from rules_builtin import registry
from rules_builtin.tree_depth import TreeDepth


def full_tree(depth: int) -> dict[str, object]:
    """The ``trees/Node`` column of a full tree of ``depth`` (ids 0 .. 2**(depth+1) - 2)."""
    return {
        "trees/Node": np.arange(2 ** (depth + 1) - 1, dtype=np.int64),
        "trees/Tree": np.zeros(2 ** (depth + 1) - 1, dtype=np.int64),
    }


def test_registered() -> None:
    """The registry finds TreeDepth by name."""
    assert registry.lookup("TREEDEPTH") is TreeDepth


def test_trees_of_max_depth_4_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """Full trees of depth 4 never exceed the default depth 4 (2019 max_depth=4 intent)."""
    trial = make_trial({s: full_tree(4) for s in range(3)})
    assert invoke_rule(TreeDepth(trial), raise_eval_cond=False).fired_steps == ()


def test_fires_at_the_step_of_a_deeper_tree(make_trial: Callable[..., Any]) -> None:
    """A tree of depth 5 at step 2 fires there, not at the shallower steps."""
    trial = make_trial({0: full_tree(3), 1: full_tree(4), 2: full_tree(5), 3: full_tree(2)})
    assert invoke_rule(TreeDepth(trial), raise_eval_cond=False).fired_steps == (2,)


def test_smallest_id_of_the_next_level_fires(make_trial: Callable[..., Any]) -> None:
    """Node id 31 is the first id at depth 5; node id 30 is the last at depth 4."""
    trial = make_trial(
        {0: {"trees/Node": np.array([0, 1, 2, 30])}, 1: {"trees/Node": np.array([0, 1, 2, 31])}}
    )
    assert invoke_rule(TreeDepth(trial), raise_eval_cond=False).fired_steps == (1,)


def test_depth_parameter(make_trial: Callable[..., Any]) -> None:
    """depth=2 fires on a depth-3 tree; depth=0 fires on any split."""
    trial = make_trial({0: full_tree(2), 1: full_tree(3)})
    assert invoke_rule(TreeDepth(trial, depth="2"), raise_eval_cond=False).fired_steps == (1,)
    assert invoke_rule(TreeDepth(trial, depth="0"), raise_eval_cond=False).fired_steps == (0, 1)


def test_prefixed_node_tensor(make_trial: Callable[..., Any]) -> None:
    """A tensor ending in /trees/Node counts; other trees/ columns do not."""
    trial = make_trial({0: {"job/trees/Node": np.arange(100), "trees/Cover": np.arange(1000)}})
    assert invoke_rule(TreeDepth(trial), raise_eval_cond=False).fired_steps == (0,)


def test_step_without_trees_is_skipped(make_trial: Callable[..., Any]) -> None:
    """A step with no trees/Node tensor is skipped."""
    trial = make_trial({0: {"train-rmse": np.float32(1.0)}, 1: full_tree(1)})
    result = invoke_rule(TreeDepth(trial), raise_eval_cond=False)
    assert (result.steps_skipped, result.steps_evaluated, result.fired_steps) == (1, 1, ())


def test_firing_reason_names_tensor_depth_and_parameter(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the trees/Node tensor, the tree depth and depth."""
    rule = TreeDepth(make_trial({0: full_tree(4), 1: full_tree(5)}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (1,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (1, ["trees/Node"])
    assert (reason["quantity"], reason["value"]) == ("tree depth", 5)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == ("depth", 4, ">")
    assert "largest node id 62 means depth 5 > depth 4 at step 1" in reason["sentence"]


def test_deep_learning_trial_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """A trial without trees/Node records nothing; the error says it needs XGBoost's tree
    dump."""
    rule = TreeDepth(make_trial({s: {"loss": np.float32(1)} for s in range(3)}))
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=3))
    assert "tensors named trees/Node (XGBoost's tree dump) selected no tensor" in text
    assert "the tree dump XGBoost's smdebug hook saves" in text


@pytest.mark.parametrize("value", ["deep", "4.5", "-1"])
def test_parameter_errors(value: str) -> None:
    """A bad depth is a ConfigurationError naming the rule, the parameter and the value."""
    with pytest.raises(ConfigurationError) as caught:
        TreeDepth(None, depth=value)
    message = str(caught.value)
    assert "TreeDepth" in message and "depth" in message and repr(value) in message
