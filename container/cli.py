"""The ``rule-evaluator`` command, and what the container's ENTRYPOINT runs.

``rule-evaluator [--key value ...]`` evaluates rules: parameters come from
``/opt/ml/config/processingjobconfig.json``, the environment, a JSON file (``--config``) and the
flags (docs/configuration.md, "Parameters"). ``rule-evaluator summary PATH`` prints what a trial holds.
``--help``, ``--version``, ``rules [NAME]`` and ``--rule NAME --help`` are answered by
``container.help`` without running anything.

Exit codes: 0 no issues, 1 a rule fired, 2 something to fix (ClientError), 3 our bug,
143 / 130 stopped by SIGTERM / SIGINT.
"""

from __future__ import annotations

import io
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # nothing more before the supervisor's signal handlers are in (mypy only)
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path
    from typing import Any, TextIO

    from container.link import ChildLink, StepWatch
    from container.signals import StopSignals
    from evaluator.config import EvaluatorConfig
    from evaluator.errors import ClientError

__all__ = ["evaluate", "main", "outputs_fields", "run"]

OPT_ML = "/opt/ml"

_own_stderr: TextIO | None = None  # our last words, once rule output owns file descriptor 2


def main(argv: Sequence[str] | None = None) -> int:
    """The ``rule-evaluator`` command: the supervisor, which runs ``run`` in a child process
    (``container.supervisor``)."""
    from container.supervisor import main as supervise

    return supervise(argv)


def run(
    argv: Sequence[str],
    *,
    signals: StopSignals | None = None,
    link: ChildLink | None = None,
    environ: Mapping[str, str] | None = None,
    on_config: Callable[[EvaluatorConfig], None] | None = None,
) -> int:
    """The command in this process: ``summary``, the answers of ``container.help``, or an
    evaluation. ``signals`` are the stop handlers already installed (the child's); ``link``
    the pipe to the supervisor, when there is one; ``environ`` the run's environment (the
    process's by default: a shared worker's runs each have their own); ``on_config`` is
    told the evaluation's configuration once it is read (``evaluate``)."""
    from container.signals import StopRequested, StopSignals

    args = list(argv)
    environ = os.environ if environ is None else environ
    opt_ml = environ.get("EVALUATOR_OPT_ML", OPT_ML)
    own = signals is None
    signals = StopSignals() if signals is None else signals
    if own:
        signals.__enter__()
    try:
        if args[:1] == ["summary"]:
            from container.summary_command import main as summary

            signals.raise_in_main = True  # waits for collection files: a stop ends it
            return summary(args[1:])
        if args[:1] == ["batch"]:
            from container.batch import main as batch

            signals.raise_in_main = False  # the batch polls the stop and stops its jobs
            return batch(args[1:], signals=signals)
        if args[:1] == ["watch"]:
            from container.watch import main as watch

            signals.raise_in_main = False  # the watch polls the stop and stops its runs
            return watch(args[1:], signals=signals)
        if args[:1] == ["watch-worker"]:
            from container.worker import main as worker

            return worker(args[1:], signals=signals, link=link)
        if args[:1] == ["report"]:
            from container.report_command import main as report

            return report(args[1:])
        if args[:1] == ["upload"]:
            from container.upload_command import main as upload

            return upload(args[1:])
        from container.help import answer

        answered = answer(args)  # --help, --version, rules [NAME], --rule NAME --help
        if answered is not None:
            return answered
        return evaluate(
            args, environ, opt_ml_root=opt_ml, signals=signals, link=link, on_config=on_config
        )
    except StopRequested as stop:
        return 128 + stop.signum
    except SystemExit as e:  # a subcommand's argparse said what was wrong (usage, exit 2)
        return e.code if isinstance(e.code, int) else 2
    except BrokenPipeError:  # e.g. piped into head: not an error
        sys.stderr.close()
        return 0
    except Exception as e:  # our bug: never exit 1, which means "a rule fired"
        return _internal_error(e, opt_ml)
    finally:
        if own:
            signals.__exit__(None, None, None)


def evaluate(
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    opt_ml_root: str = OPT_ML,
    signals: StopSignals | None = None,
    link: ChildLink | None = None,
    on_config: Callable[[EvaluatorConfig], None] | None = None,
) -> int:
    """Run the configured rules; the exit code of the most severe outcome. A stop signal
    while the configuration is read is answered once it is read, with every rule Stopped.
    ``on_config``: told the configuration once it is read and the output folder checked,
    before any rule is loaded (what it raises ends the evaluation there)."""
    from contextlib import nullcontext

    from container.signals import StopRequested, StopSignals
    from evaluator.config import load_config
    from evaluator.errors import ClientError, ConfigurationError

    with nullcontext(signals) if signals is not None else StopSignals() as signals:
        signals.raise_in_main = False
        try:
            config = load_config(argv, environ, opt_ml_root=opt_ml_root)
        except ConfigurationError as e:
            if signals.signum is not None:  # the stop is the news, not the configuration
                return _stopped_early(signals.signum, opt_ml_root)
            return _configuration_failed(e, opt_ml_root, argv=argv, environ=environ)
        from container.preflight import check_output_folder
        from container.privileges import drop_privileges

        try:
            run_as = drop_privileges(config, environ)
            check_output_folder(config.output_dir)  # before any evaluation: exit 2, not 0
        except ClientError as e:
            return _configuration_failed(e, opt_ml_root, log_format=config.log_format)
        if on_config is not None:
            on_config(config)
        if link is not None:  # before rule code: the only time the supervisor takes this
            link.send("outputs", **outputs_fields(config))
        log_stream = _capture_output(link) if link is not None else sys.stdout
        # Imported once the configuration is known good: a bad one fails without loading numpy.
        from container.compose import evaluation_for, reporter_for
        from evaluator.status import configure_logging

        configure_logging(level=config.log_level, log_format=config.log_format, stream=log_stream)
        reporter, sinks = reporter_for(
            config, environ, log_stream=log_stream, supervised=bool(link)
        )
        if run_as is not None:
            import structlog

            structlog.get_logger("evaluator.privileges").info("running_as", user=run_as)
        if signals.signum is not None:  # stopped while the configuration was read
            reporter.stop(signals.signum)
            return reporter.close()
        evaluation = evaluation_for(config, reporter, signals.stop, _step_watch(link, config))
        if link is not None:  # from here on rule code may run: the supervisor trusts its files
            link.send("untrusted")
        signals.raise_in_main = True
        try:
            evaluation.run()
        except StopRequested:
            pass  # the rules were still being set up; reported as Stopped below
        finally:
            signals.raise_in_main = False
        if signals.signum is not None:
            reporter.stop(signals.signum)
        code = reporter.close()
        if sinks:
            # The verdict first: the supervisor has the exit code before the report is done.
            if link is not None:
                link.send("verdict", exit_code=code)
            for sink in sinks:
                sink.wait()
        evaluation.close()
        return code


class _LogPipe(io.TextIOWrapper):
    """The log's pipe to the supervisor, which says it is a terminal when the supervisor's
    stdout is one (the console format's colours and progress line are for it)."""

    terminal = False

    def isatty(self) -> bool:
        return self.terminal


def outputs_fields(config: EvaluatorConfig) -> dict[str, Any]:
    """Where the run's files go and how it logs: the ``outputs`` message the supervisor takes
    (``container.link``), and what a shared worker tells the watch of each run."""
    return {
        "result_dir": os.path.abspath(config.output_dir),
        "message_dir": None if config.message_dir is None else str(config.message_dir),
        "log_format": config.log_format,
        "log_level": config.log_level,
        "step_timeout": config.rule_step_timeout,
        "report": config.report,
        "webhook_url": config.webhook_url.get_secret_value() if config.webhook_url else None,
        "trial": config.base_trial,
    }


def _capture_output(link: ChildLink) -> TextIO:
    """From here on, what anything prints on stdout/stderr goes to the supervisor as rule
    output, and the log goes to the supervisor's log pipe: this process keeps no descriptor
    of the real stdout or stderr. Returns the log's stream."""
    global _own_stderr
    terminal = os.isatty(1)  # where the supervisor writes the log: colours, a progress line
    log_fd, err_fd = link.capture_output()
    log_stream = _LogPipe(
        io.BufferedWriter(io.FileIO(log_fd, "w", closefd=True)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    log_stream.terminal = terminal
    _own_stderr = open(  # noqa: SIM115
        err_fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=True
    )
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stdout, sys.stderr = (
        open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        for fd in (1, 2)
    )
    return log_stream


def _step_watch(link: ChildLink | None, config: EvaluatorConfig) -> StepWatch | None:
    """Tells the supervisor when each rule starts and ends its work on a step, when a step
    time limit is set (``rule_step_timeout``); None otherwise."""
    if link is None or config.rule_step_timeout is None:
        return None
    from container.link import StepWatch

    return StepWatch(link, config.rule_step_timeout)


def _message_dir(opt_ml_root: str) -> Path:
    from pathlib import Path

    return Path(opt_ml_root) / "output"


def _stopped_early(signum: int, opt_ml_root: str) -> int:
    """Stopped before there was a configuration: the message files say so."""
    from evaluator.errors import ExitCode
    from evaluator.status import STOPPED_MESSAGE, write_status_files

    write_status_files(_message_dir(opt_ml_root), STOPPED_MESSAGE)
    return ExitCode.stopped_by(signum)


def _configuration_failed(
    error: ClientError,
    opt_ml_root: str,
    *,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    log_format: str | None = None,
) -> int:
    """No configuration, so no reporter: say what to fix in the log (in the chosen format),
    in the message files SageMaker shows, and once on stderr, with the flag ``argv`` most
    likely misspelt and, without arguments, the usage."""
    import structlog

    from container.preflight import early_log_format, same_terminal
    from container.suggest import flag_hints, usage
    from evaluator.status import client_error_message, configure_logging, write_status_files

    said = str(error).rstrip()
    hint = flag_hints(argv) if argv is not None else ""
    if hint and not said.endswith((".", "?", "!")):
        said += "."
    text = client_error_message(said + hint)
    configure_logging(log_format=log_format or early_log_format(argv or (), environ or {}))
    if not same_terminal():  # on one terminal, the plain line below says it once
        structlog.get_logger("evaluator.status").error(
            "rule_status", status="Error", message=text.strip(), exit_code=int(error.exit_code)
        )
    write_status_files(_message_dir(opt_ml_root), text)
    if argv is not None and not argv and not os.path.exists(f"{opt_ml_root}/config"):
        print(usage(), file=sys.stderr)  # a user without arguments, not a SageMaker job
    print(text.rstrip("\n"), file=sys.stderr)
    return error.exit_code


def _internal_error(error: Exception, opt_ml_root: str) -> int:
    """Exit 3 with SageMaker's InternalServerError text, the traceback on stderr."""
    import traceback

    from evaluator.errors import ExitCode
    from evaluator.status import internal_error_message, write_status_files

    text = internal_error_message(f"{type(error).__name__}: {error}")
    stderr = _own_stderr or sys.stderr
    traceback.print_exception(error, file=stderr)
    write_status_files(_message_dir(opt_ml_root), text)
    print(text.rstrip("\n"), file=stderr)
    return ExitCode.INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
