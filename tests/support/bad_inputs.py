"""The harness of ``tests/integration/test_bad_inputs.py``: bad input, end to end, and the
contract every such run must keep (``assert_client_error``).

Each local case is a generator: it lays out its files in its own folder (a ``Workspace``),
yields one command line, receives the finished run and checks it. A test module registers its
cases with ``Cases.register`` (``@bad_input()``); its module fixture prepares every selected case
and runs the commands two at a time (``prepare_and_run``: each case has its own folder and
/opt/ml, so the order does not matter), and each case is then checked as its own test
(``finish``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from evaluator.status import truncate_utf8
from tests.compat.golden import DATA
from tests.conftest import TEST_CREDENTIALS
from tests.support.evaluator_cli import (
    EvaluatorCli,
    EvaluatorRun,
    Invocation,
    copy_trial,
    leftover_temporary_files,
    run_concurrently,
    tree_snapshot,
)

__all__ = [
    "Case",
    "Cases",
    "Check",
    "Prepared",
    "TrialCopy",
    "Workspace",
    "assert_client_error",
    "finish",
    "prepare_and_run",
    "trial_copy",
]

Check = Generator[Invocation, EvaluatorRun, None]


@dataclass
class TrialCopy:
    """A trial folder in tmp_path and the listing it had before the run."""

    path: Path
    before: dict[str, Any]

    def __str__(self) -> str:
        return str(self.path)

    def assert_untouched(self) -> None:
        assert tree_snapshot(self.path) == self.before, f"the run changed the trial {self.path}"


def trial_copy(source: Path, destination: Path) -> TrialCopy:
    """A copy of the trial at ``source`` in ``destination``, listed as it is now."""
    path = copy_trial(source, destination)
    return TrialCopy(path, tree_snapshot(path))


class Workspace:
    """One case's folder: its /opt/ml, its rule and config files, its copy of a trial."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cli = EvaluatorCli(root)
        self.command = self.cli.command

    @functools.cached_property
    def trial(self) -> TrialCopy:
        """A copy of the smdebug-written 'vanishing' trial (VanishingGradient fires at step 8),
        listed when first asked for: before the command line that names it."""
        return trial_copy(DATA / "vanishing", self.root / "trial")

    def rule_file(self, text: str, name: str = "my_rule.py") -> Path:
        path = self.root / "rules" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def config_file(self, content: Any, name: str = "rule_config.json") -> Path:
        path = self.root / name
        path.write_text(
            content if isinstance(content, str) else json.dumps(content), encoding="utf-8"
        )
        return path


@dataclass(frozen=True)
class Case:
    """One registered case: its test id, its generator and the arguments it is called with."""

    id: str
    body: Callable[..., Check]
    args: tuple[Any, ...] = ()


class Cases:
    """The cases of one test module, as ``pytest.param``s to parametrize its test with."""

    def __init__(self) -> None:
        self.params: list[Any] = []  # pytest.param(Case, id=..., marks=...)

    def register(
        self,
        *,
        params: Mapping[str, tuple[Any, ...]] | None = None,
        xfail: str | Mapping[str, str] | None = None,
    ) -> Callable[[Any], Any]:
        """Register a case; ``params`` makes one case per entry (id -> extra arguments);
        ``xfail`` (a reason, or id -> reason) marks a known product bug, strictly."""

        def register(body: Callable[..., Check]) -> Callable[..., Check]:
            for suffix, args in (params or {"": ()}).items():
                case_id = f"{body.__name__}-{suffix}" if suffix else body.__name__
                reason = xfail.get(suffix) if isinstance(xfail, Mapping) else xfail
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                self.params.append(pytest.param(Case(case_id, body, args), id=case_id, marks=marks))
            return body

        return register


Prepared = tuple[Check, EvaluatorRun | Exception] | Exception


def prepare_and_run(selected: Sequence[Case], mktemp: Callable[[str], Path]) -> dict[str, Prepared]:
    """Every case of ``selected`` prepared in its own folder (``mktemp``), and its command run
    (two at a time). A case that breaks before its command line fails its own test, not the
    others."""
    prepared: dict[str, Prepared] = {}
    started: list[tuple[str, Check, Invocation]] = []
    for case in selected:
        workspace = Workspace(mktemp(case.id[:40]))
        check = case.body(workspace, *case.args)
        try:
            started.append((case.id, check, next(check)))
        except Exception as e:
            prepared[case.id] = e
    runs = run_concurrently([invocation for _, _, invocation in started])
    for (case_id, check, _), run in zip(started, runs):
        prepared[case_id] = (check, run)
    return prepared


def finish(case: Case, prepared: Prepared) -> None:
    """Hand the case its finished run, so that it checks it (raising what it finds)."""
    if isinstance(prepared, Exception):
        raise prepared
    check, run = prepared
    if isinstance(run, Exception):
        raise run
    try:
        check.send(run)
    except StopIteration:
        return
    pytest.fail(f"case {case.id} yields more than one command line")


# ------------------------------------------------------------------------------ the contract


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def assert_client_error(
    run: EvaluatorRun, *names: str, trial: TrialCopy | None = None, configured: bool = True
) -> str:
    """The run ended as DESIGN §5 says a user's mistake must; ``names`` (the key, file, class
    or value to fix) appear in the message. ``configured``: the configuration could be read,
    so a result file is due. Returns the message."""
    info = run.describe()
    assert run.returncode == 2, info
    assert "Traceback" not in run.stderr, info

    errors = [
        line
        for line in run.log_lines
        if line.get("event") == "rule_status" and line.get("status") == "Error"
    ]
    assert errors, f"no JSON rule_status line with status Error on stdout\n{info}"
    logged = errors[-1]["message"]
    assert logged.startswith("ClientError: "), info
    assert errors[-1].get("exit_code") == 2, info
    for name in names:
        assert name in logged, f"{name!r} is not named in the message\n{info}"

    # SageMaker shows these files' first 1 KB: the same text, what to fix within it. Bytes that
    # are not UTF-8 (lone surrogates in Python) are written backslash-escaped.
    logged = logged.encode("utf-8", "backslashreplace").decode("utf-8")
    names = tuple(n.encode("utf-8", "backslashreplace").decode("utf-8") for n in names)
    shown = truncate_utf8(logged)
    assert run.message is not None and run.message.rstrip("\n") == shown.rstrip("\n"), info
    assert run.failure == run.message, info
    for name in names:
        assert name in run.message, f"{name!r} is not in the message file\n{info}"

    result = run.result  # must parse when present
    if configured:
        assert result is not None, f"no {run.result_path}\n{info}"
    if result is not None:
        assert result["status"] == "Error" and result["exit_code"] == 2, result
        assert _escaped(result["message"]).rstrip("\n") == run.message.rstrip("\n"), result
        assert all(rule["status"] == "Error" for rule in result["rules"]), result
        assert any(rule["exit_code"] == 2 for rule in result["rules"]), result
    if not configured:  # no configuration: the command also says it on stderr
        assert run.stderr.strip().splitlines()[-1] == logged.rstrip("\n"), info
    else:
        finished = [line for line in run.log_lines if line.get("event") == "evaluation_finished"]
        assert finished and finished[-1]["status"] == "Error", info
        assert finished[-1]["exit_code"] == 2, info

    leftovers = leftover_temporary_files([run.opt_ml / "output", run.output_dir])
    assert not leftovers, f"temporary files left behind: {leftovers}"
    if trial is not None:
        trial.assert_untouched()
    for secret in (
        TEST_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        TEST_CREDENTIALS["AWS_SESSION_TOKEN"],
    ):
        assert secret not in run.stdout + run.stderr + run.message, "a credential leaked"
    return logged
