"""Many trials: their folder names, and the one a Kubernetes Indexed Job's pod evaluates.

``trial_names(trials)`` gives each trial the folder name its outputs go to, in
``rule-evaluator batch`` (``<output>/<name>/``) and in an Indexed Job (below): the trial's last
path segment, or the one before it when the last is SageMaker's ``debug-output``
(``s3://bucket/jobs/mnist-42/debug-output`` is ``mnist-42``); trials whose names collide get
the segments before, joined by ``_``, until they differ. Each name is made safe by
``evaluator.config.output_paths.safe_name`` (``..``, ``.batch`` or ``index.html`` never name an
output folder: they become ``_..``, ``_.batch``, ``_index.html``). The same list always gives
the same names.

``listed_trial(environ)``: with ``EVALUATOR_TRIALS`` (trials one per line, or comma-separated
on one line) or ``EVALUATOR_TRIALS_FILE`` (a file of them, one per line: a mounted ConfigMap),
the trial at index ``JOB_COMPLETION_INDEX`` (which Kubernetes sets in each pod of an Indexed
Job) and its name; None without a list. Blank lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaluator.config.output_paths import safe_name
from evaluator.errors import ConfigurationError

__all__ = [
    "INDEX_VARIABLE",
    "LIST_FILE_VARIABLE",
    "LIST_VARIABLE",
    "ListedTrial",
    "listed_trial",
    "parse_trial_list",
    "trial_names",
]

LIST_VARIABLE = "EVALUATOR_TRIALS"
LIST_FILE_VARIABLE = "EVALUATOR_TRIALS_FILE"
INDEX_VARIABLE = "JOB_COMPLETION_INDEX"
_SAGEMAKER_FOLDER = "debug-output"
_MAX_LIST_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ListedTrial:
    """The trial a pod of an Indexed Job evaluates."""

    trial: str
    name: str  # its output folder's name, under output_dir
    index: int
    source: str  # where it came from, for the first log line


def _segments(trial: str) -> list[str]:
    if "://" in trial and not trial.startswith("file://"):
        path = trial.split("://", 1)[1]  # object keys: '..' is a name there, not a step up
    else:  # a folder: sub/.. is the folder itself
        path = posixpath.normpath(trial.removeprefix("file://").replace("\\", "/"))
    parts = [p for p in path.split("/") if p and p != "."]
    if len(parts) > 1 and parts[-1] == _SAGEMAKER_FOLDER:
        parts.pop()
    return parts or ["trial"]


def trial_names(trials: Sequence[str]) -> list[str]:
    """One distinct folder name per trial (see the module docstring); a trial given twice is a
    ``ConfigurationError``."""
    seen: dict[str, str] = {}
    for trial in trials:
        key = trial.rstrip("/")
        if key in seen:
            raise ConfigurationError(f"the trial {trial!r} is listed twice: list each trial once")
        seen[key] = trial
    segments = [_segments(t) for t in trials]
    depth = [1] * len(trials)
    while True:
        names = [safe_name("_".join(s[-d:])) for s, d in zip(segments, depth)]
        groups: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            groups.setdefault(name, []).append(i)
        clashes = [ix for ix in groups.values() if len(ix) > 1]
        if not clashes:
            return names
        grew = False
        for ix in clashes:
            for i in ix:
                if depth[i] < len(segments[i]):
                    depth[i] += 1
                    grew = True
        if not grew:  # distinct trials that differ only in characters made safe
            for ix in clashes:
                for n, i in enumerate(ix[1:], start=2):
                    segments[i] = [*segments[i][:-1], f"{segments[i][-1]}-{n}"]


def parse_trial_list(text: str) -> list[str]:
    """Trials one per line, or comma-separated on one line; blanks and ``#`` lines skipped."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if len(lines) == 1 and "," in lines[0]:
        lines = [part.strip() for part in lines[0].split(",") if part.strip()]
    return lines


def listed_trial(environ: Mapping[str, str]) -> ListedTrial | None:
    """The trial of this pod's index, from the list in the environment; None without one."""
    text = environ.get(LIST_VARIABLE, "")
    where = LIST_VARIABLE
    file_name = environ.get(LIST_FILE_VARIABLE, "").strip()
    if file_name:
        if text.strip():
            raise ConfigurationError(
                f"both {LIST_VARIABLE} and {LIST_FILE_VARIABLE} are set: give the trial list once"
            )
        text, where = _read_list_file(file_name), file_name
    elif not text.strip():
        return None
    trials = parse_trial_list(text)
    if not trials:
        raise ConfigurationError(f"{where} lists no trial: give one trial per line")
    raw = environ.get(INDEX_VARIABLE, "").strip()
    try:
        index = int(raw)
    except ValueError:
        raise ConfigurationError(
            f"{where} lists {len(trials)} trial(s) but {INDEX_VARIABLE} is "
            f"{'not set' if not raw else repr(raw)}: run it as a Kubernetes Indexed Job "
            f"(completionMode: Indexed), or set {INDEX_VARIABLE} to a number from 0 to "
            f"{len(trials) - 1}"
        ) from None
    if not 0 <= index < len(trials):
        raise ConfigurationError(
            f"{INDEX_VARIABLE}={index} but {where} lists {len(trials)} trial(s) (indexes 0 to "
            f"{len(trials) - 1}): make the Job's completions equal the number of trials"
        )
    names = trial_names(trials)
    return ListedTrial(
        trial=trials[index],
        name=names[index],
        index=index,
        source=f"{where}[{index}] ({INDEX_VARIABLE})",
    )


def _read_list_file(name: str) -> str:
    path = Path(name)
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_LIST_BYTES + 1)
    except OSError as e:
        raise ConfigurationError(
            f"cannot read the trial list {LIST_FILE_VARIABLE}={name!r}: {e.strerror or e}"
        ) from None
    if len(data) > _MAX_LIST_BYTES:
        raise ConfigurationError(f"the trial list {name!r} is larger than 16 MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError(f"the trial list {name!r} is not UTF-8 text") from None
