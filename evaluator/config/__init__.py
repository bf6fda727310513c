"""Configuration, validated once. The only package that reads environment variables and files.

``load_config(argv, environ)`` builds the ``EvaluatorConfig`` of a run: the rules to run
(``RuleSpec``: name, source, string parameters, step window, action_json), the trial, the
output folders, our own options and the ``TrialOptions`` every trial of the run is opened with.
Sources, later ones winning:

1. the ``Environment`` map of ``/opt/ml/config/processingjobconfig.json`` (SageMaker copies
   RuleParameters there), if the file exists; its ALL-CAPS keys that are not aliases of our
   keys are SageMaker's own variables, not rule parameters;
2. process environment variables: each known key under its exact lower-case name, else its
   upper-case alias (``RULE_TO_INVOKE``), plus every key the processing config lists; other
   variables are not rule parameters;
3. a JSON file from ``--config PATH`` or ``RULE_CONFIG_FILE``: a parameters map,
   ``{"RuleParameters": ...}``, a whole ``DebugRuleConfiguration``, or a list of those
   (also as ``{"rules": [...]}``) to run several rules on one trial;
4. flags ``--key value`` / ``--key=value`` (``-`` or ``_``; ``--trial-dir`` and ``--rule-name``
   as in smdebug's old rule_invoker); unknown flags become rule parameters, and
   ``--<Rule>.<key>`` a parameter of that rule alone (``RuleSpec.rule_only``).

Trial options come from the variables of ``TRIAL_ENVIRONMENT`` (``SMDEBUG_*``, ``EVALUATOR_*``);
an explicit setting (flag, config file, ``create_trial`` argument) wins over them.

Whether each rule takes its parameters is checked once the rule classes are loaded
(``evaluator.rules.parameters``). Every value stays a string, as SageMaker sends it; known keys
are parsed here and a bad one raises ``ConfigurationError`` naming the key, the value and what
is expected.

Modules, bottom-up: ``keys`` (the vocabulary), ``values`` (parsers), ``sources`` (readers),
``models`` (the validated objects), ``resolution`` (decisions), ``output_paths`` (where
outputs named after a trial go), ``trial_list`` (many trials: folder names, and the trial of
an Indexed Job's pod), ``load`` (the order).
"""

from evaluator.config.keys import RESERVED_KEYS
from evaluator.config.load import load_config
from evaluator.config.models import EvaluatorConfig, RuleSpec, redact_parameters
from evaluator.config.sources import TRIAL_ENVIRONMENT, trial_options_from_env
from evaluator.engine.options import TrialOptions

__all__ = [
    "RESERVED_KEYS",
    "TRIAL_ENVIRONMENT",
    "EvaluatorConfig",
    "RuleSpec",
    "TrialOptions",
    "load_config",
    "redact_parameters",
    "trial_options_from_env",
]
