"""Training modes and step states, with smdebug's names and values."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["ModeKeys", "StepState", "ALLOWED_MODES", "WriterStep", "parse_mode"]


class ModeKeys(Enum):
    """The phase a step belongs to. Values match smdebug (``meta.mode`` holds the name)."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4

    # Members are singletons compared by identity; Enum's default __hash__ is Python-level
    # (hash of the name) and shows up in profiles of trial loading, where modes key every dict.
    __hash__ = object.__hash__


class StepState(Enum):
    """Answer of ``Trial.has_passed_step``."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


ALLOWED_MODES = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL)


def parse_mode(value: object) -> ModeKeys:
    """A ``ModeKeys`` from a member, its name (any case) or its integer value."""
    if isinstance(value, ModeKeys):
        return value
    if isinstance(value, str):
        try:
            return ModeKeys[value.strip().upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return ModeKeys(value)
        except ValueError:
            pass
    names = ", ".join(m.name for m in ModeKeys)
    raise ValueError(f"unknown mode {value!r}; expected one of {names}")


@dataclass(frozen=True, slots=True)
class WriterStep:
    """A step as the user sees it: the step the writer logged, with its mode when the trial's
    global steps are not the writer's (a TensorBoard run with phases: ``Trial.writer_step``).
    ``mode`` None: the global step itself, shown as SageMaker shows smdebug's steps."""

    step: int
    mode: ModeKeys | None = None

    def __str__(self) -> str:
        """``step 500``, or ``EVAL step 100``."""
        return f"step {self.step}" if self.mode is None else f"{self.mode.name} step {self.step}"
