"""Where a batch's jobs run: a pool of processes on this machine, or tasks of a Ray cluster.

Both run each job exactly as ``container.batch.job.run_job`` does (one ``rule-evaluator``
process per job), so one job's crash or kill is that job's ``Error``, never the batch's.

* ``pool``: ``jobs`` processes at once (default: the CPUs this process may use); each job's
  outputs are written in place, so a job killed with the batch resumes when the batch runs
  again.
* ``ray``: one task per job (one CPU each), at most ``jobs`` in flight (default: the cluster's
  CPUs). A task runs the job in a temporary folder of its node and returns the regular files
  of the job's own output folder (never a link, never ``.sagemaker-ignore``) and its log,
  which are written in that job's folder under the batch's output folder here (a path that
  would leave it refuses the task's whole answer): the nodes need no shared file
  system, only the package (the image) and access to the trials (S3, or a folder every node
  mounts). ``address`` is the cluster's (``ray://head:10001``, ``auto``); without one, a Ray
  process already connected is used, else a local cluster is started for the batch.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from container.batch.job import BATCH_FOLDER, JobOutcome, JobSpec, run_job
from evaluator.config.output_paths import file_inside, job_paths
from evaluator.errors import ConfigurationError
from evaluator.fileio import write_atomically

__all__ = ["run_on_pool", "run_on_ray"]

Done = Callable[[JobOutcome], None]
IGNORED_FOLDER = ".sagemaker-ignore"  # a run's temporary files: never copied back


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _not_run(spec: JobSpec, code: int) -> JobOutcome:
    return JobOutcome(
        name=spec.name,
        trial=spec.trial,
        status="Stopped",
        exit_code=code,
        message="Stopped: the batch was stopped before this job ran",
    )


def run_on_pool(
    specs: Sequence[JobSpec],
    root: Path,
    *,
    jobs: int | None,
    stop: threading.Event,
    stop_code: Callable[[], int],
    done: Done,
) -> list[JobOutcome]:
    """Run the jobs, ``jobs`` at once; each finished one is handed to ``done`` as it ends."""
    outcomes: list[JobOutcome] = []
    workers = jobs or default_jobs()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="batch-job") as pool:
        pending: dict[Future[JobOutcome], JobSpec] = {}
        queue = list(specs)
        while queue or pending:
            while queue and len(pending) < workers and not stop.is_set():
                spec = queue.pop(0)
                pending[pool.submit(run_job, spec, root, stopped=stop.is_set)] = spec
            if stop.is_set() and queue:
                outcomes += [_not_run(s, stop_code()) for s in queue]
                queue = []
            if not pending:
                continue
            finished, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                spec = pending.pop(future)
                try:
                    outcome = future.result()
                except Exception as e:  # the batch could not run it (a file it cannot write)
                    outcome = _job_failed(spec, e, "the batch could not run this job")
                outcomes.append(outcome)
                done(outcome)
    return outcomes


# ---- Ray ----------------------------------------------------------------------------------


def _job_on_node(spec: JobSpec) -> tuple[JobOutcome, dict[str, bytes], bytes | None]:
    """A Ray task: the job in a temporary folder of this node; its outcome, the regular files
    of its own output folder (paths relative to it; never a link, never ``.sagemaker-ignore``)
    and its log."""
    with tempfile.TemporaryDirectory(prefix="rule-evaluator-batch-") as folder:
        root = Path(folder)
        paths = job_paths(root, spec.name)
        outcome = run_job(spec, root)
        files = _regular_files(paths.output)
        try:
            log: bytes | None = paths.log.read_bytes()
        except OSError:
            log = None
        return outcome, files, log


def _regular_files(folder: Path) -> dict[str, bytes]:
    """Every regular file below ``folder`` (links neither followed nor read), by its path
    relative to it; ``.sagemaker-ignore`` left out."""
    files: dict[str, bytes] = {}
    for top, folders, names in os.walk(folder, followlinks=False):
        folders[:] = sorted(f for f in folders if f != IGNORED_FOLDER)
        for name in sorted(names):
            path = Path(top) / name
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue  # a link, or gone
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    files[path.relative_to(folder).as_posix()] = f.read()
    return files


def _store(
    root: Path, spec: JobSpec, files: dict[str, bytes], log: bytes | None, seconds: float | None
) -> None:
    """Write what a task returned in the job's own folder under the batch's output folder,
    its log and its request; a returned path that would leave the job's folder is refused."""
    import json

    paths = job_paths(root, spec.name)
    tmp = root / BATCH_FOLDER / "tmp"
    targets = {file_inside(paths.output, relative): data for relative, data in files.items()}
    if paths.output.is_dir():  # the run's files replace an earlier attempt's
        for old in paths.output.iterdir():
            if old.is_file():
                old.unlink()
    for target, data in targets.items():
        write_atomically(target, data, tmp_dir=tmp)
    if log is not None:
        write_atomically(paths.log, log, tmp_dir=tmp)
    write_atomically(
        paths.request,
        json.dumps({**spec.request(), "seconds": seconds}, indent=1).encode(),
        tmp_dir=tmp,
    )


def _connect(address: str | None) -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigurationError(
            "--engine ray needs Ray: pip install 'debugger-rule-evaluator[ray]' (or pip install "
            "ray) where the batch runs and on the cluster's nodes"
        ) from None
    if address is None and ray.is_initialized():
        return ray
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.ERROR,
            configure_logging=False,
        )
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise ConfigurationError(
            f"cannot connect to the Ray cluster at {address!r}: {e}; check --ray-address "
            "(ray://<head>:10001, or <head>:6379 from a node of the cluster)"
        ) from None
    return ray


def run_on_ray(
    specs: Sequence[JobSpec],
    root: Path,
    *,
    jobs: int | None,
    address: str | None,
    stop: threading.Event,
    stop_code: Callable[[], int],
    done: Done,
) -> list[JobOutcome]:
    """Run the jobs as Ray tasks, at most ``jobs`` in flight."""
    ray = _connect(address)
    task = ray.remote(num_cpus=1, max_retries=0)(_job_on_node)
    workers = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
    outcomes: list[JobOutcome] = []
    pending: dict[Any, JobSpec] = {}
    queue = list(specs)
    cancelled = False
    while queue or pending:
        while queue and len(pending) < workers and not stop.is_set():
            spec = queue.pop(0)
            pending[task.remote(spec)] = spec
        if stop.is_set():
            outcomes += [_not_run(s, stop_code()) for s in queue]
            queue = []
            if not cancelled:
                for ref in pending:
                    ray.cancel(ref)  # the task's run_job stops its job (SIGTERM) on the way out
                cancelled = True
        if not pending:
            continue
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
        for ref in ready:
            spec = pending.pop(ref)
            try:
                outcome, files, log = ray.get(ref)
                _store(root, spec, files, log, outcome.seconds)
            except Exception as e:  # the task failed or was cancelled, or its files unusable
                outcome = _task_failed(spec, e, stopped=stop.is_set(), code=stop_code())
            else:
                report = job_paths(root, spec.name).report
                outcome.report = report if (root / report).is_file() else None
            outcomes.append(outcome)
            done(outcome)
    return outcomes


def _task_failed(spec: JobSpec, error: Exception, *, stopped: bool, code: int) -> JobOutcome:
    if stopped:
        return _not_run(spec, code)
    return _job_failed(spec, error, "the Ray task of this job failed")


def _job_failed(spec: JobSpec, error: Exception, what: str) -> JobOutcome:
    """That job's ``Error`` (exit 3): the batch goes on with the others."""
    text = (f"{type(error).__name__}: {error}".splitlines() or [""])[0][:500]
    return JobOutcome(
        name=spec.name,
        trial=spec.trial,
        status="Error",
        exit_code=3,
        message=f"InternalServerError: {what}: {text}",
    )
