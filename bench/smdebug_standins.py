"""Stand-in ``evaluator`` modules for the smdebug side of bench/rules_workload.py: before
``rules_builtin`` is imported under smdebug 1.0.34's interpreter, ``install`` puts modules into
``sys.modules`` so that the rule modules' imports resolve to smdebug's classes
(``evaluator.rules.rule.Rule`` is ``smdebug.rules.Rule``, ``evaluator.errors`` holds
``smdebug.exceptions``' classes, ``evaluator.modes.ModeKeys`` is smdebug's), with our own
pure-Python helpers (the parameter parsers, the rule kit, the loss diagnosis, the report page)
loaded from their files."""

from __future__ import annotations

import importlib.util
import os
import sys
import types

__all__ = ["install"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def install(sx, ModeKeys, Rule, Actions) -> None:
    """Stand-in ``evaluator`` modules, so that ``rules_builtin`` imports smdebug's classes."""
    real = [m for m in sys.modules if m == "evaluator" or m.startswith("evaluator.")]
    if real:
        raise SystemExit(
            f"evaluator already imported ({', '.join(real)}): the stand-ins must come first"
        )

    def module(name: str, package: bool = False, **attrs) -> types.ModuleType:
        m = types.ModuleType(name, f"bench stand-in for {name}, backed by smdebug 1.0.34")
        if package:
            m.__path__ = []  # a package with no files: any other submodule fails to import
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    exceptions = {
        k: v for k, v in vars(sx).items() if isinstance(v, type) and issubclass(v, BaseException)
    }

    class EvaluatorError(Exception):
        """Stand-in of ours (smdebug has no such class)."""

    class ClientError(EvaluatorError):
        pass

    class ConfigurationError(ClientError):
        pass

    class StorageError(ClientError):
        pass

    for cls in (EvaluatorError, ClientError, ConfigurationError, StorageError):
        cls.__module__ = "evaluator.errors"
    errors = module(
        "evaluator.errors",
        **exceptions,
        EvaluatorError=EvaluatorError,
        ClientError=ClientError,
        ConfigurationError=ConfigurationError,
        StorageError=StorageError,
    )
    try:
        from smdebug.core.tensor import StepState
    except ImportError:  # pragma: no cover - 1.0.34 has it
        StepState = None
    modes = module(
        "evaluator.modes",
        ModeKeys=ModeKeys,
        ALLOWED_MODES=(ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL),
        **({"StepState": StepState} if StepState is not None else {}),
    )
    evidence = module("evaluator.rules.evidence", **_evidence_standins())
    Evidence = evidence.Evidence

    class RuleWithEvidence(Rule):
        """smdebug's Rule, plus the ``evidence`` and ``selection_hints`` the built-in
        rules use: the firing decision only (``Evidence.compare``), nothing recorded."""

        def __init__(self, base_trial, action_str=None, other_trials=None):
            super().__init__(base_trial, action_str, other_trials=other_trials)
            self.evidence = Evidence()

        def selection_hints(self):
            return []

    rule = module("evaluator.rules.rule", Rule=RuleWithEvidence)
    actions = module("evaluator.rules.actions", Actions=Actions, ClientFactory=object)
    rules = module(
        "evaluator.rules",
        package=True,
        rule=rule,
        actions=actions,
        evidence=evidence,
        Rule=RuleWithEvidence,
    )
    # Our own pure-Python helpers the rule modules import, loaded from their files (they
    # import only the stdlib, numpy and the modules loaded before them), and a stand-in
    # for the RE2 patterns: the location checks of the parameter parsers, the parsers,
    # the loss diagnosis, and the public rule kit.
    redaction = _load_file("evaluator.redaction", "evaluator/redaction.py")
    storage = module("evaluator.storage", package=True)
    storage.base = _load_file("evaluator.storage.base", "evaluator/storage/base.py")
    storage.schemes = _load_file("evaluator.storage.schemes", "evaluator/storage/schemes.py")
    # config.values asks the format registry whether a location is one a format opens itself
    # (an MLflow run); the smdebug side reads local folders only, which none does.
    module("evaluator.sources", package=True, check_location_form=lambda key, location: False)
    config = module("evaluator.config", package=True)
    config.values = _load_file("evaluator.config.values", "evaluator/config/values.py")
    rules.loss_trend = _load_file("evaluator.rules.loss_trend", "evaluator/rules/loss_trend.py")
    rules.diagnosis = _load_file("evaluator.rules.diagnosis", "evaluator/rules/diagnosis.py")
    # CreateXgboostReport writes its report with these (stdlib + numpy; the charts import
    # matplotlib when they draw, which the smdebug venv does not have).
    fileio = _load_file("evaluator.fileio", "evaluator/fileio.py")
    report = module("evaluator.report", package=True)
    # The page reads its vendored scripts as package resources (evaluator/report/static).
    report.__spec__ = importlib.util.spec_from_file_location(
        "evaluator.report",
        os.path.join(REPO_ROOT, "evaluator", "report", "__init__.py"),
        submodule_search_locations=[os.path.join(REPO_ROOT, "evaluator", "report")],
    )
    report.page = _load_file("evaluator.report.page", "evaluator/report/page.py")
    report.html_charts = _load_file(
        "evaluator.report.html_charts", "evaluator/report/html_charts.py"
    )
    report.charts = _load_file("evaluator.report.charts", "evaluator/report/charts.py")
    patterns = module("evaluator.trial.patterns", **_pattern_standins())
    trial = module("evaluator.trial", package=True, patterns=patterns)
    kit = rules.kit = module("evaluator.rules.kit", package=True)
    for part in ("params", "selection", "modes", "windows"):  # each imports those before
        setattr(
            kit,
            part,
            _load_file(f"evaluator.rules.kit.{part}", f"evaluator/rules/kit/{part}.py"),
        )
    module(
        "evaluator",
        package=True,
        errors=errors,
        modes=modes,
        rules=rules,
        config=config,
        trial=trial,
        fileio=fileio,
        report=report,
        redaction=redaction,
    )


def _load_file(name: str, relative: str) -> types.ModuleType:
    """Import one of our modules from its file under ``name`` (smdebug side)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO_ROOT, relative))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _evidence_standins() -> dict:
    """``SelectionHint`` and a minimal ``Evidence`` for the smdebug side: ``compare`` answers
    ``value fires_when threshold`` (floats) as ours does and records nothing, so the smdebug
    side pays less than ours for the same rule body."""
    import dataclasses
    import operator

    ops = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}

    @dataclasses.dataclass(frozen=True)
    class SelectionHint:
        description: str
        patterns: tuple = ()
        parameter: str | None = None
        advice: str | None = None

    class Evidence:
        def compare(self, step, tensors, *, quantity, value, parameter, threshold, fires_when,
                    sentence=None, mode=None, mode_step=None, diagnose=None):  # fmt: skip
            fired = ops[fires_when](float(value), float(threshold))
            if fired and diagnose is not None and diagnose().note:
                return False  # a firing the rule's diagnosis turns into a note, as ours
            return fired

        def checked(self, step, tensors):
            pass

        def record(self, step, tensors, *, quantity, value, **where):  # mode, mode_step
            pass

    return {"SelectionHint": SelectionHint, "Evidence": Evidence}


def _pattern_standins() -> dict:
    """``compile_pattern``/``matching_names``/``NamePattern`` (``search``, ``match``,
    ``matching``) over Python's ``re`` (the smdebug venv has no RE2): the same answers
    (``re.search``) for the plan's patterns."""
    import re

    class NamePattern:
        def __init__(self, text, flags=0):
            self._re = re.compile(text, flags)
            self.pattern = text

        def search(self, name):
            return self._re.search(name) is not None

        def match(self, name):
            return self._re.match(name) is not None

        def matching(self, names, *, anchored=False):
            test = self.match if anchored else self.search
            return {n for n in names if test(n)}

    def compile_pattern(pattern, *, what="", max_length=4096, fallback_seconds=10.0):
        if isinstance(pattern, re.Pattern):
            return NamePattern(pattern.pattern, pattern.flags)
        return NamePattern(pattern)

    def matching_names(names, patterns, *, anchored=False):
        test = "match" if anchored else "search"
        return {n for n in names if any(getattr(p, test)(n) for p in patterns)}

    return {
        "NamePattern": NamePattern,
        "compile_pattern": compile_pattern,
        "matching_names": matching_names,
    }


# --------------------------------------------------------------------------------------------
# finding the rules
