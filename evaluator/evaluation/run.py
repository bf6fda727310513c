"""``Evaluation``: open the trial, build every rule, run each on its own thread, and tell
the reporter (``evaluator.reporting``) what happens."""

from __future__ import annotations

import inspect
import logging
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from evaluator.config import EvaluatorConfig, RuleSpec
from evaluator.engine.stop import woken_by
from evaluator.engine.waits import end_of_data
from evaluator.errors import (
    ClientError,
    ConfigurationError,
    StopRequested,
    StorageError,
)
from evaluator.evaluation.failures import rule_failure, trial_error
from evaluator.evaluation.progress import Progress, StepWatch
from evaluator.reporting import StatusReporter
from evaluator.rules.coverage import checked_nothing, nothing_checked_error
from evaluator.rules.evidence import Evidence
from evaluator.rules.invoker import invoke_rule
from evaluator.rules.loader import BuiltinRules, build_rule, load_rule_class, source_folder
from evaluator.rules.parameters import effective_parameters, route_parameters
from evaluator.sources import location_format
from evaluator.sources.smdebug.parent import check_not_a_parent
from evaluator.status.resume import previous_run, run_key
from evaluator.storage.local import check_local_folder
from evaluator.storage.schemes import is_remote
from evaluator.trial import Trial, create_trial
from evaluator.trial.create import describe_location

__all__ = ["STOP_GRACE_SECONDS", "Evaluation", "StepWatch"]

log = logging.getLogger("evaluator.evaluation")

STOP_GRACE_SECONDS = 4.0  # rules get this long to reach a step boundary after a stop signal


class Evaluation:
    """Runs the configured rules over the base trial and reports through ``reporter``.

    The built-in rules are handed in (``builtins``, e.g. ``rules_builtin.registry``, by
    ``container/``): the library knows no particular rule. ``None``: only rules with a source."""

    def __init__(
        self,
        config: EvaluatorConfig,
        reporter: StatusReporter,
        stop: threading.Event,
        *,
        builtins: BuiltinRules | None,
        watch: StepWatch | None = None,
    ) -> None:
        self.config = config
        self.builtins = builtins
        self.reporter = reporter
        self.stop = stop
        self.watch = watch
        self._trials: dict[str, Trial] = {}
        # rule threads not done yet, and the condition notified as one is done (reentrant: a
        # stop set by a signal handler notifies it)
        self._running = 0
        self._ended = threading.Condition(threading.RLock())

    # ---------------------------------------------------------------- the run

    def run(self) -> None:
        """Open the trials and build the rules (the caller may interrupt this), then run."""
        try:
            self._resume_earlier_attempt()
        except ClientError as e:  # the output folder's result file cannot be taken
            for spec in self.config.rules:
                self.reporter.start(spec.configuration_name)
                self.reporter.fail(spec.configuration_name, e)
            return
        names = [
            spec.configuration_name
            for spec in self.config.rules
            if not self.reporter.finished(spec.configuration_name)
        ]
        try:
            self._say_start()
        except StorageError as e:  # the endpoint never answered: say so now, not again later
            for name in names:
                self.reporter.start(name)
                self.reporter.fail(name, trial_error(e, self.config.base_trial))
            return
        for name in names:
            self.reporter.start(name)
        try:
            base = self._open_base_trial()
        except Exception as e:
            for name in names:
                self.reporter.fail(name, trial_error(e, self.config.base_trial))
            return
        with source_folder(self._scratch()) as workdir:  # stale ones from killed runs go
            specs = [s for s in self.config.rules if s.configuration_name in names]
            classes = {s.configuration_name: self._load_class(s, workdir) for s in specs}
            routed = route_parameters(specs, classes)  # once every rule's signature is known
            rules = [
                (
                    s,
                    self._build(
                        s, classes[s.configuration_name], base, routed.get(s.configuration_name, {})
                    ),
                )
                for s in specs
            ]
            for spec, rule in rules:
                if rule is not None:
                    self._start_thread(spec, rule)
            self.wait()

    def _resume_earlier_attempt(self) -> None:
        """Go on from an earlier attempt of this run that ended without its verdict
        (``evaluator.status.resume``), or say why its result file is replaced."""
        output = Path(self.config.output_dir)
        earlier, why_not = previous_run(output, run_key(self.config.base_trial, self.config.rules))
        logger = structlog.get_logger("evaluator.evaluation")
        if earlier is None:
            if why_not is not None:
                logger.info("earlier_result_replaced", reason=why_not)
            return
        self.reporter.resume(earlier)
        logger.info(
            "evaluation_resumed",
            earlier_started_at=earlier.started_at,
            replays_up_to=earlier.steps(),
            verdicts_kept=[k for k, p in earlier.rules.items() if p.outcome is not None],
        )

    def _say_start(self) -> None:
        """One line: which trial is read, where it came from, what ends the run, and where the
        result file goes."""
        config = self.config
        options = config.trial_options
        if is_remote(config.base_trial):  # the first answer may take seconds: say so first
            from evaluator.storage.s3_reach import FIRST_CONTACT_DEADLINE

            structlog.get_logger("evaluator.evaluation").info(
                "connecting",
                trial=config.base_trial,
                gives_up_after=f"{FIRST_CONTACT_DEADLINE:g} s if the endpoint never answers",
            )
        try:
            found = describe_location(config.base_trial, options)
        except StorageError:
            self.reporter.started(trial=config.base_trial, trial_source=config.trial_source)
            raise
        if config.wait_for_training_end:
            waits = "the end marker training_job_end.ts"
        else:
            waits = f"{options.idle_scans_to_complete} idle scans (no end marker expected)"
        no_marker = found.pop("end_marker", None)  # the format says it writes none
        ends_when = found.pop("ends_when", None)  # the format has an end of its own
        if ends_when:
            waits = ends_when
        elif no_marker:
            waits = (
                f"the end marker training_job_end.ts ({no_marker}: set "
                "wait_for_training_end false to end after idle scans)"
                if config.wait_for_training_end
                else f"{options.idle_scans_to_complete} idle scans ({no_marker}; "
                "training_job_end.ts also ends it if present)"
            )
        if options.stop_signal_file:
            waits += f", or the stop signal {options.stop_signal_file}"
        _, change = end_of_data(options.idle_scans_to_complete, options.stop_signal_file)
        if not ends_when:  # (a format's own end, such as a run's status, has no marker to change)
            found["to_change"] = change
        self.reporter.started(
            trial=config.base_trial,
            trial_source=config.trial_source,
            **found,
            waits_for=waits,
            output_dir=str(Path(config.output_dir).absolute()),
        )

    def wait(self) -> None:
        """Wait for every rule thread; after a stop request, give them a few seconds at most.
        The wait wakes when a rule thread ends or the stop is set (a ``StopEvent``; a plain
        ``threading.Event`` is looked at every second), and for nothing else: rules end on the
        stop themselves, this only times the ones that do not."""
        with woken_by(self.stop, self._ended) as heard, self._ended:
            stop_seen: float | None = None
            while self._running:
                if self.stop.is_set() and stop_seen is None:
                    stop_seen = time.monotonic()
                if stop_seen is None:
                    self._ended.wait(None if heard else 1.0)
                    continue
                left = stop_seen + STOP_GRACE_SECONDS - time.monotonic()
                if left <= 0:
                    return  # the process ends anyway; rule threads are daemons
                self._ended.wait(left)

    def _scratch(self) -> str | None:
        """Where downloaded rule code goes: ``<output>/.sagemaker-ignore`` (SageMaker does not
        upload it, and it is writable in a read-only container), else the system's temp folder."""
        folder = Path(self.config.output_dir) / ".sagemaker-ignore"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        return str(folder)

    def close(self) -> None:
        for trial in self._trials.values():
            try:
                trial.close()
            except Exception:  # closing must not hide the evaluation's outcome
                log.debug("closing a trial failed", exc_info=True)

    # ---------------------------------------------------------------- setup

    def _open_base_trial(self) -> Trial:
        if not location_format(self.config.base_trial):  # a folder or an S3 prefix
            check_local_folder(self.config.base_trial, "base_trial")
            check_not_a_parent(self.config.base_trial, "base_trial")
        trial = self._trial(self.config.base_trial, range_steps=self._range_steps())
        self.reporter.watch_data_problems(lambda: (trial.data_problem_count, trial.data_problems))
        self.reporter.show_steps(trial.writer_step)
        trial.start_polling()
        return trial

    def _trial(
        self, path: str, *, range_steps: tuple[int | None, int | None] | None = None
    ) -> Trial:
        """The trial at ``path``, opened once with the configuration's options (no environment
        variable is read again: what the configuration decided stands)."""
        if path not in self._trials:
            options = self.config.trial_options
            if options.idle_scans_to_complete is not None:
                # A local copy without an end marker: don't wait long for collections either.
                options = options.model_copy(
                    update={
                        "collection_wait_timeout": min(
                            options.collection_wait_timeout,
                            max(5.0, options.poll_interval * (options.idle_scans_to_complete + 2)),
                        )
                    }
                )
            self._trials[path] = create_trial(path, range_steps=range_steps, options=options)
        return self._trials[path]

    def _range_steps(self) -> tuple[int | None, int | None] | None:
        """The union of the rules' step windows, so index files outside it are never read."""
        starts = [spec.start_step for spec in self.config.rules]
        ends = [spec.end_step for spec in self.config.rules]
        begin = min(starts) or None
        end = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
        return None if begin is None and end is None else (begin, end)

    def _load_class(self, spec: RuleSpec, workdir: Path) -> type | None:
        """The rule's class; None, the rule reported failed, when it cannot be loaded."""
        try:
            return load_rule_class(
                spec.name,
                spec.source,
                workdir=workdir / spec.configuration_name,
                builtins=self.builtins,
            )
        except StopRequested:
            raise
        except Exception as e:
            self.reporter.fail(spec.configuration_name, e)
            return None

    def _build(
        self,
        spec: RuleSpec,
        cls: type | None,
        base: Trial,
        routed: dict[str, str] | ConfigurationError,
    ) -> Any:
        """The rule built from the parameters it takes (``route_parameters``), its effective
        parameters recorded; None, the rule reported failed, when it cannot be built."""
        name = spec.configuration_name
        if cls is None:
            return None  # already reported by _load_class
        try:
            if isinstance(routed, ConfigurationError):
                raise routed
            parameters = dict(routed)
            if "output_dir" in _constructor_arguments(cls):
                # Report writers (CreateXgboostReport) write into the rule's output folder.
                parameters.setdefault("output_dir", str(self.config.output_dir))
            for path in self.config.other_trials:
                if not location_format(path):
                    check_local_folder(path, "other_trials")
                    check_not_a_parent(path, "other_trials")
            others = [self._trial(path) for path in self.config.other_trials]
            rule = build_rule(
                cls,
                base,
                parameters,
                other_trials=others,
                action_json=spec.action_json,
                fallback=spec.environment_parameters,
            )
        except StopRequested:
            raise
        except Exception as e:
            self.reporter.fail(name, e)
            return None
        hand_over = getattr(rule, "hand_over_actions", None)
        if self.reporter.runs_actions and callable(hand_over):
            hand_over()  # a firing reaches the actions through the run's sinks
        self.reporter.set_parameters(
            name, effective_parameters(cls, parameters, spec.environment_parameters)
        )
        return rule

    # ---------------------------------------------------------------- rule threads

    def _start_thread(self, spec: RuleSpec, rule: Any) -> None:
        thread = threading.Thread(
            target=self._rule_thread,
            args=(spec, rule),
            name=f"rule-{spec.configuration_name}",
            daemon=True,
        )
        with self._ended:
            self._running += 1
        thread.start()

    def _rule_thread(self, spec: RuleSpec, rule: Any) -> None:
        try:
            self._run_rule(spec, rule)
        finally:  # the rule is done, its outcome reported: the evaluation's wait hears it
            with self._ended:
                self._running -= 1
                self._ended.notify_all()

    def _run_rule(self, spec: RuleSpec, rule: Any) -> None:
        name = spec.configuration_name
        found = getattr(rule, "evidence", None)
        evidence = found if isinstance(found, Evidence) else None
        if evidence is not None:
            self.reporter.attach_evidence(name, evidence)
        observer = Progress(self.reporter, name, rule, evidence, self.watch)
        try:
            result = invoke_rule(
                rule,
                spec.start_step,
                spec.end_step,
                raise_eval_cond=False,
                observer=observer,
                stop=self.stop,
                continue_after_fire=self.config.continue_after_fire,
                wrap_errors=True,
            )
            end = getattr(rule, "on_evaluation_end", None)
            if callable(end) and not self.stop.is_set():
                observer.on_step_start(None)
                end()  # e.g. a report writer's final report
        except BaseException as e:  # sys.exit(), KeyboardInterrupt...: still the rule's failure
            self.reporter.fail(name, rule_failure(spec, e))
            return
        finally:
            observer.idle()
        if self.stop.is_set():
            return
        if checked_nothing(rule, result):
            visited = result.steps_evaluated + result.steps_skipped
            error = nothing_checked_error(
                rule, steps_visited=visited, window=(spec.start_step, spec.end_step)
            )
            # A ClientError (no traceback: nothing failed) that keeps smdebug's class name.
            self.reporter.fail(name, ClientError(str(error), error_type=type(error).__name__))
            return
        self.reporter.finish(name)


def _constructor_arguments(cls: type) -> set[str]:
    try:
        return set(inspect.signature(cls.__init__).parameters)  # type: ignore[misc]
    except (TypeError, ValueError):
        return set()
