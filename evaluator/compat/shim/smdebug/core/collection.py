"""smdebug.core.collection: ``Collection`` (as a trial reads it) and ``CollectionKeys``."""

from __future__ import annotations

from evaluator.formats.collections_file import Collection

__all__ = ["Collection", "CollectionKeys"]


class CollectionKeys:
    """The names of the collections smdebug's hooks create."""

    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    # XGBoost's
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"
