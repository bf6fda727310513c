"""A Hugging Face ``Trainer``'s ``trainer_state.json`` (every checkpoint folder holds one), read
as the scalars the Trainer's TensorBoard callback logs for the same run: bytes in, scalars out,
no I/O.

``log_history`` is the list of what ``Trainer.log`` was given, each entry with the ``step``
(the global step) it was logged at. The TensorBoard callback writes every number of an entry
but ``step`` as a scalar at that step, under a tag that says its phase: a key ``eval_<name>``
becomes ``eval/<name>``, ``test_<name>`` becomes ``test/<name>``, and any other key
``train/<key>`` (``loss`` -> ``train/loss``, ``grad_norm`` -> ``train/grad_norm``,
``learning_rate``, ``epoch``, the end-of-training ``train_runtime`` -> ``train/train_runtime``).
So a rule reads a trainer state exactly as it reads the Trainer's TensorBoard log of that run.

The Trainer writes the file with Python's ``json``, which spells non-finite numbers ``NaN``,
``Infinity`` and ``-Infinity``: they are read as such. The entry ``Trainer.train`` logs when
training ends (``train_runtime``) marks the run finished.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

__all__ = ["STATE_FILE", "TrainerState", "TrainerStateError", "parse_trainer_state", "tag_of"]

STATE_FILE = "trainer_state.json"  # the name the Trainer saves it under

_END_KEY = "train_runtime"  # logged once, by Trainer.train, when training is over


@dataclass(frozen=True)
class TrainerState:
    """What a ``trainer_state.json`` says: its scalars as ``(tag, step, value)`` in the order
    logged, the Trainer's own counters, and whether training had ended."""

    scalars: list[tuple[str, int, float]] = field(default_factory=list)
    global_step: int | None = None
    max_steps: int | None = None
    finished: bool = False
    skipped: int = 0  # log entries without a step (added by hand: Trainer.log always sets it)


def tag_of(key: str) -> str:
    """The TensorBoard tag the Trainer's callback logs ``key`` of a log entry under."""
    for prefix in ("eval", "test"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1 :]}"
    return f"train/{key}"


class TrainerStateError(ValueError):
    """The file is not a trainer state (the message says what is wrong, and where)."""


def parse_trainer_state(data: bytes, *, source: str) -> TrainerState:
    """The scalars of a ``trainer_state.json`` (``source`` names it in errors)."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TrainerStateError(f"{source} is not JSON: {e}") from None
    if not isinstance(document, dict) or not isinstance(document.get("log_history"), list):
        raise TrainerStateError(
            f"{source} is not a Hugging Face trainer state: no log_history list in it"
        )
    scalars: list[tuple[str, int, float]] = []
    finished, skipped = False, 0
    for position, entry in enumerate(document["log_history"]):
        if not isinstance(entry, dict):
            raise TrainerStateError(f"{source}: log_history[{position}] is not an object")
        step = entry.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            skipped += 1  # no step to log it at: the callback never saw it
            continue
        for key, value in entry.items():
            number = _number(value)
            if key == "step" or number is None:
                continue  # the Trainer's callback logs text as text, and skips the rest
            scalars.append((tag_of(key), step, number))
            finished = finished or key == _END_KEY
    return TrainerState(
        scalars,
        _count(document.get("global_step")),
        _count(document.get("max_steps")),
        finished,
        skipped,
    )


def _number(value: object) -> float | None:
    """A scalar the callback logs (an int, a float or a bool, as ``isinstance(v, (int,
    float))`` takes it), as a float; None for anything else."""
    if not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an int too large for a float (TensorBoard's would be infinite)
        return math.inf if value > 0 else -math.inf


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
