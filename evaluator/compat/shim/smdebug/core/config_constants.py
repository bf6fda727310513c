"""smdebug.core.config_constants: smdebug 1.0.34's constant names, with its values.

Tests and scripts read environment-variable names from here (``INCOMPLETE_STEP_WAIT_WINDOW_KEY``,
``MISSING_EVENT_FILE_RETRY_LIMIT_KEY`` …). The trial-option variables among them are honoured
by ``smdebug.trials.create_trial`` and the evaluator (docs/configuration.md, "Trial options");
the others concern smdebug's training hooks and are here so that imports of them resolve.
"""

from __future__ import annotations

# -- what the evaluator reads (evaluator.config.sources) -------------------------------------
INCOMPLETE_STEP_WAIT_WINDOW_KEY = "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"
INCOMPLETE_STEP_WAIT_WINDOW_DEFAULT = 1000
MISSING_EVENT_FILE_RETRY_LIMIT_KEY = "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT"
MISSING_EVENT_FILE_RETRY_LIMIT = 100  # looks, 2 s apart
TRAINING_END_DELAY_REFRESH_KEY = "SMDEBUG_TRAINING_END_DELAY_REFRESH"
TRAINING_END_DELAY_REFRESH_DEFAULT = 1  # smdebug's; the evaluator's default is 0

# -- file names of the on-disk layout ---------------------------------------------------------
DEFAULT_WORKER_NAME = "worker_0"
DEFAULT_COLLECTIONS_FILE_NAME = "worker_0_collections.json"
CLAIM_FILENAME = "claim.smd"
METADATA_FILENAME = "metadata.json"
METADATA_FILENAME_S3_UPLOADED = "metadata.json.sagemaker-uploaded"
TRAINING_RUN = "training-run"
LATEST_GLOBAL_STEP_SEEN = "latest-global-step-seen"
LATEST_GLOBAL_STEP_SAVED = "latest-global-step-saved"
LATEST_MODE_STEP = "latest-mode-step"

# -- the hook's configuration (SageMaker's debughookconfig.json and friends) -----------------
CONFIG_FILE_PATH_ENV_STR = "SMDEBUG_CONFIG_FILE_PATH"
DEFAULT_CONFIG_FILE_PATH = "/opt/ml/input/config/debughookconfig.json"
CONFIG_OUTDIR_KEY = "LocalPath"
CONFIG_HOOK_PARAMS_KEY = "HookParameters"
CONFIG_COLLECTION_CONFIG_KEY = "CollectionConfigurations"
CONFIG_COLLECTION_NAME_KEY = "CollectionName"
CONFIG_COLLECTION_PARAMS_KEY = "CollectionParameters"
CONFIG_REDUCTION_CONFIGS_KEY = "reduction_configs"
CONFIG_SAVE_CONFIGS_KEY = "save_configs"
CONFIG_DRYRUN_KEY = "dry_run"
CONFIG_RDN_CFG_KEY = "reduction_config"
CONFIG_INCLUDE_REGEX_KEY = "include_regex"
CONFIG_INCLUDE_WORKERS_KEY = "include_workers"
CONFIG_SAVE_ALL_KEY = "save_all"
EXPORT_TENSORBOARD_KEY = "export_tensorboard"
TENSORBOARD_DIR_KEY = "tensorboard_dir"
TENSORBOARD_CONFIG_FILE_PATH_ENV_STR = "TENSORBOARD_CONFIG_FILE_PATH"
DEFAULT_SAGEMAKER_TENSORBOARD_PATH = "/opt/ml/input/config/tensorboardoutputconfig.json"
DEFAULT_SAGEMAKER_METRICS_PATH = "SAGEMAKER_METRICS_DIRECTORY"
DEFAULT_SAGEMAKER_OUTDIR = "/opt/ml/output/tensors"
CHECKPOINT_CONFIG_FILE_PATH_ENV_VAR = "CHECKPOINT_CONFIG_FILE_PATH"
CHECKPOINT_DIR_KEY = "LocalPath"
DEFAULT_CHECKPOINT_CONFIG_FILE = "/opt/ml/input/config/checkpointconfig.json"
DEFAULT_RESOURCE_CONFIG_FILE = "/opt/ml/input/config/resourceconfig.json"
CALLABLE_CACHE_ENV_VAR = "SMDEBUG_KERAS_CALLABLE_CACHE_TYPE"
DEFAULT_CALLABLE_CACHE = "CACHE_PER_MODE"
DEFAULT_SAVED_COLLECTIONS = ["losses"]

# -- logging and reports ----------------------------------------------------------------------
LOG_DUPLICATION_THRESHOLD = 3
PAPERMILL_EXECUTION_ENV_VAR = "PAPERMILL_EXECUTION"
PROFILER_REPORT_VERSION = "profiler_report_v1"
PROFILER_TELEMETRY_URL = "https://sm-profiler-report-{region}.s3.{region}.amazonaws.com"
