"""``MlflowSource``: an MLflow run's metric histories as a trial (docs/mlflow.md).

Metric keys are named as TensorBoard tags are (``evaluator.formats.metric_names``, the one
place these rules live): a phase word gives the key's mode (``train_loss``, ``train/loss`` ->
TRAIN ``loss``; ``val_loss``, ``eval_loss`` -> EVAL ``loss``; Lightning's ``_step`` suffix
after it dropped, its ``_epoch`` series kept apart), and a child run named for a phase
(``train``, ``val``: a run logged with ``nested=True`` under the trial's run) gives each of
its keys that mode, as a phase folder of a TensorBoard run does. With phases, mode steps are
MLflow's steps and the global step is ``2 * step`` (TRAIN) or ``2 * step + 1`` (EVAL), as for
a TensorBoard log; without, every key is a GLOBAL tensor and the global step is MLflow's step.
Collections are TensorBoard's defaults over the tensor names (``losses``, ``gradients``
(``grad_norm``), ``metrics`` ...).

Each scan asks the run (and its phase child runs) for its latest metrics, one request each,
and reads again the whole history of every key whose latest value changed (the keys of one
scan together: ``RunClient.histories``); its new steps go to the trial as one ``StepBatch``
(``ScalarValues``). A run whose status is FINISHED, FAILED or KILLED has ended: the trial is
complete once the scan that saw it is applied.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from evaluator.engine.options import TrialOptions
from evaluator.engine.scalars import WORKER, ScalarValues, Series
from evaluator.engine.source import IndexScan, LoadedCollections, ParsedIndex, StepRange
from evaluator.engine.source_base import SourceBase
from evaluator.engine.waits import WaitNotice
from evaluator.errors import ClientError
from evaluator.formats.collections_file import CollectionsFile
from evaluator.formats.metric_names import MAX_PHASED_STEP, TagCollections, phase_of_folder
from evaluator.modes import ModeKeys
from evaluator.sources.mlflow.client import (
    ENDED_STATUSES,
    History,
    RunClient,
    RunFacts,
    child_phase_runs,
)
from evaluator.sources.mlflow.location import RunLocation
from evaluator.storage.base import Storage

if TYPE_CHECKING:
    from evaluator.engine.cache import TrialCache
    from evaluator.engine.problems import DataProblems
    from evaluator.engine.runner import BackgroundLoop
    from evaluator.engine.view import TrialView

__all__ = ["MlflowSource"]

_Key = tuple[str, str]  # (run id, metric key)
_NAMED_CHILDREN = 5  # child runs a parent run's ClientError names


class MlflowSource(SourceBase):
    """Reads one MLflow run (and its phase child runs) through MLflow's client."""

    kind = "mlflow"

    def __init__(
        self, run: RunLocation, options: TrialOptions, *, storage: Storage | None = None
    ) -> None:
        self.storage = storage  # a file store's run folder, when given as a path
        self.options = options
        self.run = run
        self.client = RunClient(run, deadline=options.mlflow_request_deadline)
        self.values = ScalarValues()
        self._tags = TagCollections(None)
        self._phase_runs: dict[str, ModeKeys] = {}  # child run id -> its mode
        self._latest: dict[_Key, tuple[int, int, float]] = {}
        self._histories: dict[_Key, History] = {}
        self._facts: RunFacts | None = None
        self._ended = False
        self._phases = False
        self._scans = 0
        self._problems: DataProblems | None = None  # the trial's, once its values are opened

    # ---------------------------------------------------------------- opening

    async def load_collections(
        self, *, timeout: float, poll_interval: float, wait_log_interval: float = 30.0
    ) -> LoadedCollections:
        """Wait until the run has logged a metric or has phase child runs (a run that ended
        without either is a ClientError, and so is a sweep's parent run: no metrics of its
        own, child runs of their own)."""
        deadline = time.monotonic() + timeout
        notice: WaitNotice | None = None
        while True:
            facts = await self._read_facts()
            children = await self.client.children(facts.experiment_id)
            self._phase_runs = child_phase_runs(children, phase_of_folder)
            if facts.latest or self._phase_runs:
                break
            if children:
                raise ClientError(_parent_run_message(self.run.shown, children))
            if self._ended or time.monotonic() >= deadline:
                state = f"ended ({facts.status})" if self._ended else "logged none"
                raise ClientError(
                    f"MLflow run {self.run.shown} has no metrics: the run {state} after "
                    f"{timeout:g} s; log the values rules read (mlflow.log_metric('loss', v, "
                    "step=step): docs/mlflow.md)"
                )
            notice = notice or WaitNotice(
                "MLflow metrics", self.run.shown, interval=wait_log_interval
            )
            notice.tick()
            await asyncio.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        self._phases = bool(self._phase_runs)
        manifest = CollectionsFile(dict(self._tags.collections), num_workers=1)
        return LoadedCollections(manifest, {WORKER}, [])

    async def _read_facts(self) -> RunFacts:
        facts = await self.client.run()
        self._facts = facts
        self._ended = facts.status in ENDED_STATUSES
        return facts

    # ---------------------------------------------------------------- scans

    async def scan_new(self, range_steps: StepRange, *, with_end_marker: bool) -> IndexScan:
        """Read the histories of the keys that changed since the last scan; hand on the steps
        they brought."""
        facts = await self._read_facts()  # first: histories read after it hold all it saw
        latest = {(self.run.run_id, k): v for k, v in facts.latest.items()}
        for child in self._phase_runs:
            child_facts = await self.client.call("get_run", _child_facts, child)
            latest.update({(child, k): v for k, v in child_facts.items()})
        changed = [key for key, seen in latest.items() if self._latest.get(key) != seen]
        for run_id in dict.fromkeys(r for r, _ in changed):
            keys = [k for r, k in changed if r == run_id]
            read = await self.client.histories(run_id, keys)
            self._histories.update({(run_id, k): h for k, h in read.items()})
        self._latest.update(latest)
        end = with_end_marker and self._ended
        if not changed:
            return IndexScan([], None, end_marker=end)
        batch = self.values.batch(self._series(range_steps), self._to_global)
        if not batch.steps:
            return IndexScan([], None, end_marker=end)
        self._scans += 1
        last = max(g[-1] for _, _, g in batch.steps)
        return IndexScan([ParsedIndex(f"mlflow#{self._scans}", last, WORKER, batch)], None, end)

    def _series(self, range_steps: tuple[int | None, int | None] | None) -> Series:
        """Every key's history under its tensor name and mode (see the module docstring)."""
        tags = self._tags
        for _, key in self._histories:
            tags.add(key, "scalar")
        tags.publish()  # the collections gain the keys filed since the last scan
        if not tags.decided:
            self._phases = tags.decide() or self._phases
        parts: dict[tuple[ModeKeys, str], list[tuple[np.ndarray, np.ndarray]]] = {}
        for (run_id, key), history in self._histories.items():
            mode, name = self._place(run_id, key)
            steps, values = history.steps, history.values
            if self._phases and len(steps) and int(np.abs(steps).max()) > MAX_PHASED_STEP:
                steps, values = self._fitting(run_id, key, mode, steps, values)
            if range_steps is not None:
                inside = _inside(self._to_global(mode, steps), range_steps)
                steps, values = steps[inside], values[inside]
            if len(steps):
                parts.setdefault((mode, name), []).append((steps, values))
        return {at: _merged(found) for at, found in parts.items()}

    def _fitting(
        self, run_id: str, key: str, mode: ModeKeys, steps: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The values of a key of a run with phases at steps whose global step fits in an
        int64; the others are left out, as a ``step_too_large`` data problem of the key."""
        fits = np.abs(steps) <= MAX_PHASED_STEP
        if self._problems is not None:
            self._problems.note(
                file=f"{self.run.shown} (run {run_id}) metric {key}",
                step=int(steps[fits].max()) if fits.any() else -1,
                worker=WORKER,
                problem="step_too_large",
                tensor=key,
                mode=mode.name,
                detail=f"{int((~fits).sum())} value(s) at steps past {MAX_PHASED_STEP} "
                "(2**62 - 1), the largest whose global step fits in 64 bits; left out",
                trial_complete=self._ended,
            )
        return steps[fits], values[fits]

    def _place(self, run_id: str, key: str) -> tuple[ModeKeys, str]:
        """The (mode, tensor name) of one run's key."""
        name = self._tags.tensor_name(key)
        phase = self._phase_runs.get(run_id)
        if phase is not None:
            return phase, name
        found = self._tags.tag_phases.get(key) if self._tags.uses_tag_phases else None
        if found is not None:
            return found[1], found[0]
        return (ModeKeys.TRAIN if self._phases else ModeKeys.GLOBAL), name

    def _to_global(self, mode: ModeKeys, steps: np.ndarray) -> np.ndarray:
        if not self._phases:
            return steps
        return 2 * steps + (1 if mode == ModeKeys.EVAL else 0)

    def writer_step(self, global_step: int) -> tuple[ModeKeys, int] | None:
        """The step MLflow holds for ``global_step``, and its mode (``Trial.writer_step``):
        ``_to_global``'s inverse; None for a run without phases (its steps are MLflow's)."""
        if not self._phases:
            return None
        return (ModeKeys.EVAL if global_step % 2 else ModeKeys.TRAIN), global_step // 2

    # ---------------------------------------------------------------- the rest of a Source

    async def training_ended(self) -> bool:
        return self._ended

    async def read_optional(self, key: str) -> bytes | None:
        return None  # a run holds no files the trial reads (a stop signal file among them)

    async def aclose(self) -> None:
        self.values.close()
        self.client.close()
        if self.storage is not None:
            await self.storage.aclose()

    def open_values(self, cache: TrialCache, view: TrialView, loop: BackgroundLoop) -> ScalarValues:
        self._problems = cache.problems
        return self.values.open(view)

    def describe(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": f"MLflow run ({self.run.shown})"}
        if self._tags.decided:
            found["mapping"] = self._mapping()
        found["ends_when"] = "the run's status: FINISHED, FAILED or KILLED"
        return found

    def _mapping(self) -> str:
        children = ", ".join(f"{r} -> {m.name}" for r, m in sorted(self._phase_runs.items()))
        steps = (
            "steps shown as MLflow holds them, with their mode (mode step = MLflow step; the "
            "rules' global step = 2 x MLflow step, +1 for EVAL)"
            if self._phases
            else "global step = MLflow step"
        )
        said = ", ".join(
            f"{key} -> {name} ({mode.name})"
            for key, (name, mode) in sorted(self._tags.tag_phases.items())[:12]
        )
        text = f"metric keys are tensor names; {steps}"
        text += f"; phase child runs {children}" if children else ""
        return text + (f"; phase words: {said}" if said and self._tags.uses_tag_phases else "")

    async def preview(self) -> dict[str, Any]:
        """``describe()`` after one look at the run, without waiting."""
        facts = await self._read_facts()
        for key in facts.latest:
            self._tags.add(key, "scalar")
        self._tags.publish()
        self._phases = self._tags.decide() or self._phases
        return self.describe()


def _inside(steps: np.ndarray, range_steps: tuple[int | None, int | None]) -> np.ndarray:
    begin, end = range_steps
    inside = np.ones(len(steps), bool)
    if begin is not None:
        inside &= steps >= begin
    if end is not None:
        inside &= steps < end
    return inside


def _merged(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One series from the keys that name the same tensor (``loss`` and ``train_loss``, say):
    the longest one, plus the steps only the others logged."""
    parts = sorted(parts, key=lambda p: len(p[0]), reverse=True)
    steps, values = parts[0]
    for more_steps, more_values in parts[1:]:
        extra = ~np.isin(more_steps, steps)
        if extra.any():
            steps = np.concatenate([steps, more_steps[extra]])
            values = np.concatenate([values, more_values[extra]])
            order = np.argsort(steps, kind="stable")
            steps, values = steps[order], values[order]
    return steps, values


def _child_facts(client: Any, run_id: str) -> dict[str, tuple[int, int, float]]:
    run = client.get_run(run_id)
    return {m.key: (int(m.step), int(m.timestamp), float(m.value)) for m in run.data._metric_objs}


def _parent_run_message(shown: str, children: dict[str, str]) -> str:
    """What to do with a sweep's parent run: evaluate its child runs, named."""
    named = [f"runs:/{rid}" + (f" ({name})" if name else "") for rid, name in children.items()]
    more = f" and {len(named) - _NAMED_CHILDREN} more" if len(named) > _NAMED_CHILDREN else ""
    return (
        f"MLflow run {shown} logs no metrics of its own and is the parent of "
        f"{len(children)} child run(s), each a run of its own (a sweep's trials): evaluate "
        f"those instead: {', '.join(named[:_NAMED_CHILDREN])}{more} (rule-evaluator watch "
        "--mlflow-experiment evaluates every run of the experiment: docs/mlflow.md)"
    )
