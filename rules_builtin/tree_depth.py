"""TreeDepth: XGBoost trees that grow deeper than a given depth."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from evaluator.errors import TensorUnavailableForStep
from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_int
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register

__all__ = ["NODE_IDS", "TreeDepth"]

# The XGBoost hook's tree dump saves one tensor per column of ``trees_to_dataframe``; the
# ``Node`` column holds the node ids of the tree(s) grown at the step.
NODE_IDS = re.compile(r"(^|/)trees/Node$")


@register
class TreeDepth(Rule):
    """Fires at a step when the tree saved at that step is deeper than ``depth`` (default 4).

    Node ids are the values of the tensors named ``trees/Node`` (or ending in ``/trees/Node``;
    the pattern is ``NODE_IDS``), as XGBoost's smdebug hook saves its tree dump. The depth is
    ``floor(log2(max_id + 1))``: the depth of node ``max_id`` when nodes are numbered
    breadth-first, root 0 (the root alone has depth 0). A tree of depth d has at most
    2**(d+1) - 1 nodes, numbered from 0, so this never exceeds the true depth and equals it for
    a full tree:
    the rule never fires on a tree within ``depth`` (XGBoost ``max_depth=4`` does not fire
    with the default) and fires on one deep enough to need larger ids.

    Non-finite and negative ids are ignored. A step without a ``trees/Node`` tensor is skipped
    (``TensorUnavailableForStep``).
    """

    PARAMETERS = (
        Param("depth", "4", "int", "Fire when a tree is deeper than this (the root is depth 0)."),
    )

    def __init__(
        self, base_trial: Any, depth: str | int = "4", action_str: str | None = None
    ) -> None:
        super().__init__(base_trial, action_str)
        self.depth = parse_int(self.rule_name, "depth", depth, minimum=0)
        self._node_names: dict[str, bool] = {}  # name -> NODE_IDS matches it (asked once)

    def _is_node(self, name: str) -> bool:
        found = self._node_names.get(name)
        if found is None:
            found = self._node_names[name] = NODE_IDS.search(name) is not None
        return found

    def selection_hints(self) -> list[SelectionHint]:
        return [
            SelectionHint(
                "tensors named trees/Node (XGBoost's tree dump)",
                ("trees/Node",),
                None,
                "TreeDepth reads the tree dump XGBoost's smdebug hook saves (the trees collection, "
                "gbtree and dart boosters); a deep-learning trial has none",
            )
        ]

    def invoke_at_step(self, step: int) -> bool:
        names = [n for n in self.base_trial.tensor_names(step=step) if self._is_node(n)]
        if not names:
            raise TensorUnavailableForStep("trees/Node", step)
        largest = -1
        for name in names:
            ids = np.asarray(self.base_trial.tensor(name).value(step), dtype=np.float64).ravel()
            ids = ids[np.isfinite(ids) & (ids >= 0)]
            if ids.size:
                largest = max(largest, int(ids.max()))
        if largest < 0:
            return False
        depth = (largest + 1).bit_length() - 1
        return self.evidence.compare(
            step,
            names,
            quantity="tree depth",
            value=depth,
            parameter="depth",
            threshold=self.depth,
            fires_when=">",
            sentence=lambda: (
                f"{self.rule_name}: largest node id {largest} means depth {depth} > depth "
                f"{self.depth} at {step_words(self.base_trial, step)}"
            ),
        )
