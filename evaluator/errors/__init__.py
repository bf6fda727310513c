"""Every exception the evaluator raises, in one package: ``smdebug_tree`` and
``evaluator_tree``, re-exported here (import them from ``evaluator.errors``).

Two families live here:

* the **smdebug tree** — class names, base classes, constructor arguments, attributes and
  message texts identical to smdebug 1.0.34, because users' rules catch them by name::

      SMDebugError
      ├── SMDebugCustomerError
      ├── SMDebugTypeError (TypeError)
      ├── SMDebugRuntimeError (RuntimeError)
      │   └── CorruptRecordError            ours: a damaged event-file record (file, offset)
      ├── SMDebugNotImplementedError (NotImplementedError)
      ├── SMDebugValueError (ValueError)
      ├── InvalidCollectionConfiguration, StepNotYetAvailable,
      ├── MissingCollectionFiles
      │   └── CollectionFilesTimeout          ours: gave up waiting (training still running)
      ├── IndexReaderException, StepUnavailable, TensorUnavailableForStep,
      │   └── HistogramValueUnavailable     ours: value() of a TensorBoard histogram
      ├── ShapeUnavailableForStep, TensorUnavailable, InvalidWorker, NoMoreProfilerData,
      ├── NoMoreData, RuleEvaluationConditionMet, InsufficientInformationForRuleInvocation
      └── UnsupportedDtypeError (SMDebugValueError, KeyError)  ours: a DataType numpy cannot hold

* the **evaluator tree** — operational failures, each knowing who must act (its ``ExitCode``)
  and the type name the result file reports (``error_type``: the class's own name unless the
  constructor was given another, such as smdebug's name for a rule that checked nothing)::

      EvaluatorError
      ├── ClientError                       the user must fix something (exit 2)
      │   ├── StorageError
      │   │   ├── ObjectNotFound
      │   │   ├── AccessDenied
      │   │   └── BucketNotFound
      │   ├── ConfigurationError
      │   └── RuleCodeError                 a user's rule raised (rule, step, file and line)
      └── InternalServerError               our bug (exit 3)
          └── BuiltinRuleError              a built-in rule raised (rule, step)

  ``RuleCodeError`` and ``BuiltinRuleError`` report the type of the exception the rule raised
  and keep that exception as ``__cause__`` (its traceback goes into the result file).

Two are not errors for users: ``IncompleteRecord`` says "the last record is still being written,
come back later from the same offset"; ``RuleFailed`` carries the step at which a rule raised
from ``invoke_rule`` to the evaluation, which reports the rule's own exception; and
``StopRequested`` (a ``BaseException``) carries a stop signal out of setup code.
"""

from __future__ import annotations

from evaluator.errors.evaluator_tree import (
    AccessDenied,
    BucketNotFound,
    BuiltinRuleError,
    ClientError,
    ConfigurationError,
    EvaluatorError,
    ExitCode,
    InternalServerError,
    ObjectNotFound,
    RuleCodeError,
    RuleFailed,
    StopRequested,
    StorageError,
)
from evaluator.errors.smdebug_tree import (
    CollectionFilesTimeout,
    CorruptRecordError,
    HistogramValueUnavailable,
    IncompleteRecord,
    IndexReaderException,
    InsufficientInformationForRuleInvocation,
    InvalidCollectionConfiguration,
    InvalidWorker,
    MissingCollectionFiles,
    NoMoreData,
    NoMoreProfilerData,
    RuleEvaluationConditionMet,
    ShapeUnavailableForStep,
    SMDebugCustomerError,
    SMDebugError,
    SMDebugNotImplementedError,
    SMDebugRuntimeError,
    SMDebugTypeError,
    SMDebugValueError,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
    UnsupportedDtypeError,
)

__all__ = [
    "AccessDenied",
    "BucketNotFound",
    "BuiltinRuleError",
    "ClientError",
    "CollectionFilesTimeout",
    "ConfigurationError",
    "CorruptRecordError",
    "EvaluatorError",
    "ExitCode",
    "IncompleteRecord",
    "IndexReaderException",
    "InsufficientInformationForRuleInvocation",
    "InternalServerError",
    "InvalidCollectionConfiguration",
    "InvalidWorker",
    "MissingCollectionFiles",
    "NoMoreData",
    "NoMoreProfilerData",
    "ObjectNotFound",
    "RuleCodeError",
    "RuleEvaluationConditionMet",
    "RuleFailed",
    "SMDebugCustomerError",
    "SMDebugError",
    "SMDebugNotImplementedError",
    "SMDebugRuntimeError",
    "SMDebugTypeError",
    "SMDebugValueError",
    "StopRequested",
    "ShapeUnavailableForStep",
    "HistogramValueUnavailable",
    "StepNotYetAvailable",
    "StepUnavailable",
    "StorageError",
    "TensorUnavailable",
    "TensorUnavailableForStep",
    "UnsupportedDtypeError",
]
