"""smdebug 1.0.34's exception tree, name for name (users' rules catch these by name), and ours
that derive from it (see ``evaluator.errors`` for the picture)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaluator.modes import ModeKeys

# --------------------------------------------------------------------------------------------
# smdebug's tree. The custom __init__s deliberately do not call super().__init__ with a message:
# smdebug's don't, so ``e.args`` stays the positional constructor arguments (set by
# BaseException.__new__) and ``str(e)`` comes from __str__.


class SMDebugError(Exception):
    """Base of every smdebug exception."""


class SMDebugCustomerError(SMDebugError):
    pass


class SMDebugTypeError(SMDebugError, TypeError):
    pass


class SMDebugRuntimeError(SMDebugError, RuntimeError):
    pass


class SMDebugNotImplementedError(SMDebugError, NotImplementedError):
    pass


class SMDebugValueError(SMDebugError, ValueError):
    pass


class InvalidCollectionConfiguration(SMDebugError):
    def __init__(self, c_name: str) -> None:
        self.c_name = c_name

    def __str__(self) -> str:
        # smdebug's text has nine spaces here (a backslash-newline inside its f-string).
        return (
            f"Collection {self.c_name} has not been configured.         "
            "Please fill in tensor_name or include_regex"
        )


class StepNotYetAvailable(SMDebugError):
    def __init__(self, step: int, mode: ModeKeys) -> None:
        self.step = step
        self.mode = mode

    def __str__(self) -> str:
        return f"Step {self.step} of mode {self.mode.name} not yet available"


class MissingCollectionFiles(SMDebugError):
    def __init__(self) -> None:
        pass

    def __str__(self) -> str:
        return "Training job has ended. All the collection files could not be loaded"


class IndexReaderException(SMDebugError):
    def __init__(self, message: str) -> None:
        self.message = message

    def __str__(self) -> str:
        return self.message


class StepUnavailable(SMDebugError):
    def __init__(self, step: int, mode: ModeKeys) -> None:
        self.step = step
        self.mode = mode

    def __str__(self) -> str:
        return f"Step {self.step} of mode {self.mode.name} is not available as it was not saved"


class TensorUnavailableForStep(SMDebugError):
    def __init__(
        self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL, has_reductions: bool = False
    ) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode
        self.has_reductions = has_reductions

    def __str__(self) -> str:
        msg = (
            f"Value for tensor {self.tname} is not available for step {self.step} "
            f"with mode {self.mode.name} as it was not saved."
        )
        if self.has_reductions:
            msg += (
                "This tensor has reductions saved for this step. "
                "You might want to query for the reductions."
            )
        return msg


class HistogramValueUnavailable(TensorUnavailableForStep):
    """Ours: ``value()`` of a TensorBoard histogram, whose elements were never logged."""

    def __init__(self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        super().__init__(tname, step, mode, has_reductions=True)

    def __str__(self) -> str:
        return (
            f"{self.tname} at step {self.step} (mode {self.mode.name}) is a TensorBoard "
            "histogram: its elements were not logged, so it has no value. Call "
            "tensor.reduction_value(step, 'min' | 'max' | 'mean' | 'variance' | 'std' | 'l2' "
            "| 'sum', abs=...) for its reductions, or tensor.histogram(step) for its buckets "
            "and exact count (docs/tensorboard.md)."
        )


class ShapeUnavailableForStep(SMDebugError):
    def __init__(self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        self.tname = tname
        self.step = step
        self.mode = mode

    def __str__(self) -> str:
        return (
            f"Shape for tensor {self.tname} is not available for step {self.step} "
            f"with mode {self.mode.name} as it was not saved."
        )


class TensorUnavailable(SMDebugError):
    def __init__(self, tname: str) -> None:
        self.tname = tname

    def __str__(self) -> str:
        return f"Tensor {self.tname} was not saved."


class InvalidWorker(SMDebugError):
    def __init__(self, worker: str) -> None:
        self.worker = worker

    def __str__(self) -> str:
        return f"Invalid Worker: {self.worker}"


class NoMoreProfilerData(SMDebugError):
    def __init__(self, timestamp: Any) -> None:
        self.timestamp = timestamp
        self.msg = f"Looking for timestamp {timestamp} and reached end of training."

    def __str__(self) -> str:
        return self.msg


class NoMoreData(SMDebugError):
    def __init__(self, step: int, mode: ModeKeys, last_step: int) -> None:
        self.step = step
        self.mode = mode
        self.last_step = last_step
        self.msg = (
            f"Looking for step {step} of mode {mode.name} and reached end of training. "
            f"Max step available is {last_step}"
        )

    def __str__(self) -> str:
        return self.msg


class RuleEvaluationConditionMet(SMDebugError):
    def __init__(self, rule_name: str, step: int, end_of_rule: bool = False) -> None:
        self.rule_name = rule_name
        self.step = step
        self.end_of_rule = end_of_rule
        # Ours: the rule's actions this condition calls for, when the rule handed them to
        # the run's outputs (``Rule.hand_over_actions``); whoever reports it runs them once.
        self.actions: Callable[[], None] | None = None

    def __str__(self) -> str:
        return (
            f"Evaluation of the rule {self.rule_name} at step {self.step} "
            "resulted in the condition being met"
        )


class InsufficientInformationForRuleInvocation(SMDebugError):
    def __init__(self, rule_name: str, message: str) -> None:
        self.rule_name = rule_name
        self.message = message

    def __str__(self) -> str:
        return f"Insufficient information to invoke rule {self.rule_name}: {self.message}"


# --------------------------------------------------------------------------------------------
# Ours, in the smdebug tree so that code catching smdebug's classes keeps working.


class CorruptRecordError(SMDebugRuntimeError):
    """A record of an event file failed its checks: names the file and the byte offset."""

    def __init__(self, source: str, offset: int, reason: str) -> None:
        self.source = source
        self.offset = offset
        self.reason = reason

    def __str__(self) -> str:
        return f"corrupt record in {self.source} at byte offset {self.offset}: {self.reason}"


class UnsupportedDtypeError(SMDebugValueError, KeyError):
    """A tensor's DataType has no numpy equivalent (bfloat16, quantized, resource, variant).

    Also a ``KeyError``: smdebug raises a bare ``KeyError`` for dtypes it cannot read, and rules
    written against it may catch that.
    """

    def __init__(self, dtype_enum: int, dtype_name: str) -> None:
        self.dtype_enum = dtype_enum
        self.dtype_name = dtype_name

    def __str__(self) -> str:
        return (
            f"tensor DataType {self.dtype_name} ({self.dtype_enum}) cannot be read as a numpy array"
        )


class CollectionFilesTimeout(MissingCollectionFiles):
    """Collection files did not appear in time while training had not ended (smdebug waits
    forever). A ``MissingCollectionFiles`` so that code catching smdebug's class still works."""

    def __init__(self, uri: str, timeout: float, found: int, needed: int) -> None:
        self.uri = uri
        self.timeout = timeout
        self.found = found
        self.needed = needed

    def __str__(self) -> str:
        return (
            f"found {self.found} of {self.needed} collection file(s) under "
            f"{self.uri.rstrip('/')}/collections/000000000/ after waiting {self.timeout:g} s; "
            "check that the path is a smdebug output folder and that the training job's hook "
            "is writing to it (or raise collection_wait_timeout)"
        )


class IncompleteRecord(Exception):
    """The data ends inside a record: it is still being written. Retry later from ``offset``."""

    def __init__(self, source: str, offset: int, needed: int, available: int) -> None:
        self.source = source
        self.offset = offset
        self.needed = needed
        self.available = available

    def __str__(self) -> str:
        return (
            f"incomplete record in {self.source} at byte offset {self.offset}: "
            f"needs {self.needed} bytes, {self.available} available"
        )
