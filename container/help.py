"""The command's front: ``--help``, ``--help-env``, ``--version``, ``rules [NAME]`` and
``--rule NAME --help``.

argparse is used here, and only here, for what it does well: grouped, wrapped help text and the
small fixed grammar of the ``rules`` subcommand. It does not parse a run's flags, which stay with
``evaluator.config.sources.parse_argv``: they are open-ended (any unknown ``--key`` is a rule
parameter, ``--<Rule>.<key>`` one rule's), ``-`` and ``_`` are the same, an abbreviation must
never be completed (argparse would read ``--out`` as ``--output-dir``), and they merge with the
environment and the config file in one order. The flag list is generated from the keys the
configuration knows (``KNOWN_KEYS``, ``ALIASES``) and the defaults of its models; a key without
a line in ``_KEY_HELP`` still appears, marked, and the tests fail on it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from collections.abc import Sequence

__all__ = ["answer", "env_help", "flag_names", "main_help", "rules_command", "version"]

PROG = "rule-evaluator"
_GROUPS = {
    "trial": "the training job's debug output to read",
    "rule": "which rule runs, on which steps, and what happens when it fires",
    "parameters": "rule parameters: every other --key is one, passed to the rule as a string",
    "output": "where the result file goes",
    "logging": "what is printed",
    "waiting": "reading a trial that is still being written; the tuning environment "
    "variables: --help-env",
}
_HELP_FLAGS = ("--help", "-h")


def _defaults() -> dict[str, str]:
    """Defaults read from the configuration's own models and constants, so the help cannot
    drift from them."""
    from evaluator.config import EvaluatorConfig, RuleSpec, TrialOptions
    from evaluator.config.resolution import LOCAL_OUTPUT, SAGEMAKER_OUTPUT

    run, rule, trial = (
        EvaluatorConfig.model_fields,
        RuleSpec.model_fields,
        TrialOptions.model_fields,
    )
    return {
        "start_step": str(rule["start_step"].default),
        "continue_after_fire": str(run["continue_after_fire"].default).lower(),
        "progress_interval": f"{run['progress_interval'].default:g} s",
        "checkpoint_interval": f"{run['checkpoint_interval'].default:g} s",
        "log_level": str(run["log_level"].default),
        "report": str(run["report"].default),
        "poll_interval": f"{trial['poll_interval'].default:g} s",
        "output_dir": f"/opt/ml/{SAGEMAKER_OUTPUT} under SageMaker (a /opt/ml/processing "
        f"folder exists), else ./{LOCAL_OUTPUT}",
    }


# canonical key -> (group, metavar, meaning, default when it is not read from a model)
_KEY_HELP: dict[str, tuple[str, str, str, str | None]] = {
    "base_trial": (
        "trial",
        "PATH_OR_S3_URI",
        "the trial: a folder, file://... or s3://bucket/prefix",
        "S3_PATH, else the processing input /opt/ml/processing/input/tensors",
    ),
    "s3_path": ("trial", "S3_URI", "the trial when base_trial is not given (SageMaker's)", None),
    "other_trials": ("trial", "A,B", "more trials, for rules that compare runs", None),
    "other_trial": ("trial", "TRIAL", "one more trial", None),
    "other_trials_paths": ("trial", "A;B", "more trials, separated by ';'", None),
    "rule_to_invoke": (
        "rule",
        "NAME[,NAME]",
        "the rule: a built-in name (any case; see 'rule-evaluator rules') or the class in "
        "source_s3_uri; A,B runs several",
        None,
    ),
    "source_s3_uri": (
        "rule",
        "URI",
        "your rule's code: an S3 .py object or prefix, a local file or folder, file://...",
        None,
    ),
    "start_step": ("rule", "STEP", "first global step evaluated (inclusive)", None),
    "end_step": ("rule", "STEP", "global step to stop before (exclusive)", "the end of training"),
    "action_json": (
        "rule",
        "JSON",
        "actions when the rule fires: stoptraining, email, sms",
        None,
    ),
    "continue_after_fire": (
        "rule",
        "BOOL",
        "keep evaluating after a firing and report every firing step",
        None,
    ),
    "rule_config_file": (
        "parameters",
        "FILE",
        "a JSON file: RuleParameters, a DebugRuleConfiguration, or a list of them",
        None,
    ),
    "output_dir": (
        "output",
        "FOLDER",
        "where rule_evaluation_result.json goes",
        None,
    ),
    "report": (
        "output",
        "none|html",
        "the rule report beside the result file: rule_report.html, written after the verdict, "
        "or none",
        None,
    ),
    "webhook_url": (
        "output",
        "URL",
        "POST every rule status change as JSON to this http(s) URL (a Slack-compatible "
        "'text' included); a secret, never logged",
        "none",
    ),
    "mlflow_write_back": (
        "output",
        "BOOL",
        "write each rule's status, fired step and diagnosis as tags of the MLflow run the trial "
        "is, and the result file and report as its artifacts (docs/mlflow.md)",
        "false",
    ),
    "log_format": (
        "logging",
        "json|console",
        "JSON lines, or readable lines",
        "console on a terminal, else json",
    ),
    "log_level": ("logging", "LEVEL", "DEBUG, INFO, WARNING, ERROR or CRITICAL", None),
    "progress_interval": ("logging", "SECONDS", "seconds between progress lines", None),
    "checkpoint_interval": (
        "logging",
        "SECONDS",
        "seconds between rewrites of the result file while steps are evaluated",
        None,
    ),
    "wait_for_training_end": (
        "waiting",
        "BOOL",
        "wait for training_job_end.ts; when false, a trial is complete after two idle scans",
        "true for an S3 trial inside a SageMaker job, else false",
    ),
    "poll_interval": ("waiting", "SECONDS", "seconds between scans for new data", None),
    "tensorboard_run": (
        "trial",
        "NAME",
        "the run (sub-folder) to read in a folder of several TensorBoard runs",
        "the only run",
    ),
    "tensorboard_tag_phases": (
        "trial",
        "auto|true|false",
        "read a phase word in a TensorBoard tag (train/loss, val_loss) as its mode",
        "auto",
    ),
    "mlflow_tracking_uri": (
        "trial",
        "URI",
        "the MLflow tracking store of a runs:/<run_id> trial: sqlite:///mlflow.db, "
        "http://host:port or an mlruns folder (docs/mlflow.md)",
        "none",
    ),
    "trial_format": (
        "trial",
        "FORMAT",
        "smdebug, tensorboard, trainer_state, mlflow, a plug-in's, or auto (from what the trial "
        "holds)",
        "auto",
    ),
    "rule_step_timeout": (
        "parameters",
        "SECONDS",
        "end the run (ClientError, exit 2) when a rule spends longer than this on one step",
        "no limit",
    ),
}


def flag_names(key: str) -> list[str]:
    """Every flag spelling of a known key: its own and its aliases in the ``-`` form, then the
    aliases matched exactly (``--local_path``)."""
    from evaluator.config.keys import ALIASES, ENV_ALIASES

    aliases = sorted(a for a, k in ALIASES.items() if k == key)
    exact = sorted(a for a, k in ENV_ALIASES.items() if k == key and a.islower())
    return ["--" + n.replace("_", "-") for n in [key, *aliases]] + ["--" + a for a in exact]


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; an option's metavar once, after all its spellings."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        metavar = self._metavar_formatter(action, action.dest)(1)[0]
        return f"{', '.join(action.option_strings)} {metavar}"


def _key_line(key: str, defaults: dict[str, str]) -> tuple[str, str, str]:
    from evaluator.config.keys import BOOL_KEYS

    group, metavar, meaning, default = _KEY_HELP.get(
        key, ("parameters", "VALUE", "(no description: add one to container/help.py)", None)
    )
    default = defaults.get(key, default)
    if key in BOOL_KEYS:
        meaning += "; the flag alone means true"
    text = f"{meaning} (environment {key.upper()}" + (f"; default: {default})" if default else ")")
    return group, metavar, text.replace("%", "%%")


def _parser() -> argparse.ArgumentParser:
    from evaluator.config.keys import KNOWN_KEYS, TRIAL_OPTION_KEYS

    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=(
            f"{PROG} [--key VALUE | --key=VALUE ...]\n"
            f"       {PROG} rules [NAME [--verbose | --source]]\n"
            f"       {PROG} summary PATH [--json]\n"
            f"       {PROG} report OUTPUT_DIR\n"
            f"       {PROG} upload FOLDER DESTINATION [--create-bucket]\n"
            f"       {PROG} batch TRIAL... --rule NAME --output-dir DIR\n"
            f"       {PROG} watch ROOT --rule NAME --output-dir DIR\n"
            f"       {PROG} --rule NAME --help | --help | --help-env | --version"
        ),
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=_Formatter,
        add_help=False,
    )
    groups = {name: parser.add_argument_group(name, text) for name, text in _GROUPS.items()}
    defaults = _defaults()
    listed = KNOWN_KEYS - (TRIAL_OPTION_KEYS - _KEY_HELP.keys())  # the rest: --<trial-option>
    ordered = [k for k in _KEY_HELP if k in listed] + sorted(listed - _KEY_HELP.keys())
    for key in ordered:
        group, metavar, text = _key_line(key, defaults)
        groups[group].add_argument(*flag_names(key), metavar=metavar, help=text)
    groups["trial"].add_argument(
        "--other-trial-<i>", metavar="TRIAL", help="more trials, by number (environment too)"
    )
    groups["waiting"].add_argument(
        "--<trial-option>",
        metavar="VALUE",
        help="every option of --help-env is a flag too, e.g. --prefetch-steps 0 (a flag wins)",
    )
    groups["parameters"].add_argument(
        "--<key>",
        metavar="VALUE",
        help="a parameter of the rule(s), e.g. --threshold 1e-6 (see 'rule-evaluator rules NAME')",
    )
    groups["parameters"].add_argument(
        "--<Rule>.<key>",
        metavar="VALUE",
        help="a parameter for that rule only, e.g. --VanishingGradient.threshold 1e-6",
    )
    other = parser.add_argument_group("other")
    other.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    other.add_argument(
        "--help-env", action="store_true", help="show the tuning environment variables and exit"
    )
    other.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


def env_help() -> str:
    """The text of ``rule-evaluator --help-env``: the tuning options read from the environment
    only, each with its default (docs/configuration.md has them as a table)."""
    from evaluator.config import TRIAL_ENVIRONMENT, TrialOptions

    fields = TrialOptions.model_fields
    lines = textwrap.wrap(
        "Tuning environment variables: how a trial is read and waited for, each read once when "
        "the run starts; the flag named beside a variable wins over it (so does a key of that "
        "name in RuleParameters or the --config file). The same as a table: "
        "docs/configuration.md.",
        96,
    )
    lines.append("")
    from evaluator.config.keys import TRIAL_OPTION_KEYS

    for var, name in TRIAL_ENVIRONMENT.items():
        default = fields[name].default
        flag = f", --{name.replace('_', '-')}" if name in TRIAL_OPTION_KEYS else ""
        text = f"{var}{flag} (default {'none' if default is None else default}): "
        text += str(fields[name].description)
        lines += textwrap.wrap(
            text, 94, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False
        )
    return "\n".join(lines) + "\n"


_DESCRIPTION = textwrap.fill(
    "Evaluate SageMaker Debugger rules on a training job's debug output. Each setting below is "
    "a flag, an environment variable or a key of the --config file (later ones win: the "
    "processing job config < the environment < the file < flags); '-' and '_' are the same in "
    "flags. Exit codes: 0 no issues, 1 a rule fired, 2 something to fix, 3 our bug, 143/130 "
    "stopped.",
    96,
)
_EPILOG = f"""commands:
  {PROG} rules           the built-in rules, one line each on what they detect
  {PROG} rules NAME      what a rule detects, its parameters and an example
  {PROG} rules NAME --verbose  the rule's full description
  {PROG} rules NAME --source  the rule's Python source, to copy into your own rule
  {PROG} summary PATH    what a trial holds (steps, collections, tensors)
  {PROG} report DIR      write a run's rule_report.html again from its output folder
  {PROG} upload DIR DEST copy a trial folder to S3 or a folder (CI: docs/usage.md)
  {PROG} batch TRIAL...  many trials in parallel, one summary (batch --help; docs/scale.md)
  {PROG} watch ROOT      every run under ROOT, evaluated as it appears (watch --help; docs/watch.md)

documentation:
  README.md          the first commands, examples and exit codes
  docs/index.md      every page of the documentation
  docs/usage.md      running rules, statuses, the result file, summary, batch, CI
  docs/configuration.md  every parameter and the tuning environment variables
  docs/rules.md      every built-in rule, its parameters and measured behaviour
  docs/container.md  the container image, SageMaker and docker run
  docs/report.md     the HTML rule report written beside the result file
  docs/reliability.md  signals, exit codes, limits, S3 deadlines and resuming
"""


def main_help() -> str:
    """The text of ``rule-evaluator --help``."""
    return _parser().format_help()


def version() -> str:
    from evaluator import __version__

    return f"{PROG} {__version__}"


def answer(argv: Sequence[str]) -> int | None:
    """Answer ``argv`` when it asks for help, the version or the rules (the exit code), else
    None: a run, for ``evaluate``."""
    args = list(argv)
    if args[:1] == ["rules"]:
        return rules_command(args[1:])
    if "--help-env" in args:
        print(env_help(), end="")
        return 0
    if args == ["--version"]:
        print(version())
        return 0
    if args[:1] == ["help"] or any(a in _HELP_FLAGS for a in args):
        rest = [a for a in args[1:] if a not in _HELP_FLAGS] if args[:1] == ["help"] else args
        return _help_for([a for a in rest if a not in _HELP_FLAGS])
    return None


def _help_for(rest: Sequence[str]) -> int:
    """The help of the rule(s) ``rest`` names (``--rule NAME``), else the command's."""
    from evaluator.config.sources import parse_argv
    from evaluator.errors import ConfigurationError

    try:
        flags, _ = parse_argv(rest)
    except ConfigurationError:
        flags = {}
    names = [n.strip() for n in flags.get("rule_to_invoke", "").split(",") if n.strip()]
    if not names:
        print(main_help(), end="")
        return 0
    if "source_s3_uri" in flags:
        print(
            f"{', '.join(names)}: your rule (source_s3_uri); its parameters are its "
            "constructor's arguments, given as --key VALUE.\n"
        )
        print(main_help(), end="")
        return 0
    codes = [_describe_rule(name) for name in names]
    return max(codes)


def rules_command(argv: Sequence[str]) -> int:
    """``rules``: every built-in rule in one line; ``rules NAME``: one rule in full."""
    from container.suggest import SuggestingParser

    parser = SuggestingParser(
        prog=f"{PROG} rules",
        description="The built-in rules: what each detects; with NAME, its parameters.",
    )
    parser.add_argument("name", nargs="?", help="a built-in rule (any case)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "-v", "--verbose", action="store_true", help="the rule's full description (with NAME)"
    )
    how.add_argument(
        "--source",
        action="store_true",
        help="print the rule's Python source, to copy into your own rule (docs/custom-rules.md)",
    )
    args = parser.parse_args(argv)
    for flag, given in (("--source", args.source), ("--verbose", args.verbose)):
        if given and not args.name:
            parser.error(f"{flag} needs a rule NAME")
    if args.name:
        return _describe_rule(args.name, source=args.source, verbose=args.verbose)
    from rules_builtin import registry
    from rules_builtin._describe import rule_class, summary

    names = registry.names()
    width = max(len(n) for n in names) + 2
    for name in names:
        print(f"{name.ljust(width)}{summary(rule_class(name))}")
    print(
        f"\n{PROG} rules NAME: a rule's parameters (--verbose: all of it); rules NAME --source: "
        "its code, to copy. Details: docs/rules.md"
    )
    return 0


def _describe_rule(name: str, *, source: bool = False, verbose: bool = False) -> int:
    from evaluator.errors import ExitCode
    from rules_builtin import registry
    from rules_builtin._describe import module_source, text_section

    if registry.lookup(name) is None:
        names = registry.names()
        by_lower = {n.lower(): n for n in names}
        wanted = name.strip().lower()
        close = [n for n in by_lower if n.startswith(wanted)] or difflib.get_close_matches(
            wanted, list(by_lower), n=3, cutoff=0.6
        )
        hint = f"; did you mean {' or '.join(by_lower[c] for c in close)}?" if close else "."
        print(
            f"ClientError: no built-in rule named {name!r}{hint} '{PROG} rules' lists them all; "
            "your own rule needs --source_s3_uri.",
            file=sys.stderr,
        )
        return int(ExitCode.CLIENT_ERROR)
    if source:
        print(module_source(name), end="")
        return 0
    print(text_section(name, program=PROG, verbose=verbose))
    return 0
