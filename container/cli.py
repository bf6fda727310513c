"""The ``rule-evaluator`` command, and what the container's ENTRYPOINT runs.

``rule-evaluator [--key value ...]`` evaluates rules: parameters come from
``/opt/ml/config/processingjobconfig.json``, the environment, a JSON file (``--config``) and the
flags (see README, "Parameters"). ``rule-evaluator summary PATH`` prints what a trial holds.
``--help``, ``--version``, ``rules [NAME]`` and ``--rule NAME --help`` are answered by
``container.help`` without running anything.

Exit codes: 0 no issues, 1 a rule fired, 2 something to fix (ClientError), 3 our bug,
143 / 130 stopped by SIGTERM / SIGINT.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import structlog

from container.help import answer
from container.signals import StopRequested, StopSignals
from evaluator.errors import ClientError, ConfigurationError, ExitCode, SMDebugError

__all__ = ["evaluate", "main"]

OPT_ML = "/opt/ml"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["summary"]:
            return _summary(args[1:])
        answered = answer(args)  # --help, --version, rules [NAME], --rule NAME --help
        if answered is not None:
            return answered
        return evaluate(args, os.environ, opt_ml_root=os.environ.get("EVALUATOR_OPT_ML", OPT_ML))
    except BrokenPipeError:  # e.g. piped into head: not an error
        sys.stderr.close()
        return 0
    except Exception as e:  # our bug: never exit 1, which means "a rule fired"
        return _internal_error(e, os.environ.get("EVALUATOR_OPT_ML", OPT_ML))


def evaluate(argv: Sequence[str], environ: Mapping[str, str], *, opt_ml_root: str = OPT_ML) -> int:
    """Run the configured rules; the exit code of the most severe outcome."""
    from evaluator.config import load_config

    with StopSignals() as signals:
        try:
            config = load_config(argv, environ, opt_ml_root=opt_ml_root)
        except ConfigurationError as e:
            return _configuration_failed(e, opt_ml_root)
        except StopRequested as stop:
            return ExitCode.stopped_by(stop.signum)
        # Imported once the configuration is known good: a bad one fails without loading numpy.
        from evaluator.evaluation import Evaluation
        from evaluator.status import StatusReporter, configure_logging

        configure_logging(level=config.log_level, log_format=config.log_format)
        reporter = StatusReporter.from_config(
            config, console=config.log_format == "console" and sys.stdout.isatty()
        )
        evaluation = Evaluation(config, reporter, signals.stop)
        try:
            evaluation.run()
        except StopRequested:
            pass  # the rules were still being set up; reported as Stopped below
        finally:
            signals.raise_in_main = False
        if signals.signum is not None:
            reporter.stop(signals.signum)
        code = reporter.close()
        evaluation.close()
        return code


def _configuration_failed(error: ConfigurationError, opt_ml_root: str) -> int:
    """No configuration, so no reporter: say what to fix on stderr, in the log, and in the
    message files SageMaker shows."""
    from evaluator.status import client_error_message, configure_logging, write_status_files

    configure_logging()
    text = client_error_message(str(error))
    structlog.get_logger("evaluator.status").error(
        "rule_status", status="Error", message=text.strip(), exit_code=int(error.exit_code)
    )
    write_status_files(Path(opt_ml_root) / "output", text)
    print(text.rstrip("\n"), file=sys.stderr)
    return error.exit_code


def _internal_error(error: Exception, opt_ml_root: str) -> int:
    """Exit 3 with SageMaker's InternalServerError text, the traceback on stderr."""
    import traceback

    from evaluator.status import internal_error_message, write_status_files

    text = internal_error_message(f"{type(error).__name__}: {error}")
    traceback.print_exception(error, file=sys.stderr)
    write_status_files(Path(opt_ml_root) / "output", text)
    print(text.rstrip("\n"), file=sys.stderr)
    return ExitCode.INTERNAL_ERROR


def _summary(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rule-evaluator summary", description="Print what a trial holds."
    )
    parser.add_argument(
        "path", help="the training job's debug output: a folder or s3://bucket/prefix"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--collection-wait-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for collection files (default 600)",
    )
    args = parser.parse_args(argv)
    from evaluator.config import trial_options_from_env
    from evaluator.storage.local import check_local_folder
    from evaluator.summary import format_summary, summarize
    from evaluator.trial import create_trial

    wait = args.collection_wait_timeout
    try:
        # the trial-option variables, then the flag when given
        check_local_folder(args.path, "summary PATH")  # a missing folder fails at once
        options = trial_options_from_env(
            os.environ, **({} if wait is None else {"collection_wait_timeout": wait})
        )
        with create_trial(args.path, options=options) as trial:
            summary = summarize(trial)
    except (ClientError, SMDebugError) as e:
        print(f"ClientError: {e}", file=sys.stderr)
        return ExitCode.CLIENT_ERROR
    print(json.dumps(summary.to_dict(), indent=2) if args.json else format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
