"""Run the ``rule-evaluator`` command as a user does (a subprocess, a clean environment) and
inspect everything it leaves behind: exit code, JSON log lines, message files, result file.

``EvaluatorCli(tmp_path)`` lays out ``<tmp>/opt_ml/output`` (so the message files are written)
and runs ``python -m container.cli`` from the repository root with only ``PATH``,
``EVALUATOR_OPT_ML`` and, when asked, the ``AWS_*`` variables of the test process (the moto
fixtures set them): at once (``cli(...)``), or prepared (``cli.command(...)``) and run with
others by ``run_concurrently``. ``tree_snapshot`` records every file of a folder (size, mtime,
hash) to prove a run left a trial untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ROOT",
    "EvaluatorCli",
    "EvaluatorRun",
    "Invocation",
    "child_of",
    "wait_until_sigterm_is_handled",
    "copy_trial",
    "leftover_temporary_files",
    "run_concurrently",
    "tree_snapshot",
]

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 60.0
RESULT_FILE = "rule_evaluation_result.json"


@dataclass
class EvaluatorRun:
    """What one run of the command produced."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    opt_ml: Path
    output_dir: Path

    @property
    def log_lines(self) -> list[dict[str, Any]]:
        """Every JSON object printed on stdout, in order (other lines are ignored)."""
        lines = []
        for line in self.stdout.splitlines():
            if line.startswith("{"):
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    pass
        return lines

    def event(self, name: str) -> dict[str, Any]:
        """The first log line of the event ``name`` (KeyError naming what was logged)."""
        for line in self.log_lines:
            if line.get("event") == name:
                return line
        raise KeyError(f"no {name!r} line; logged: {[e.get('event') for e in self.log_lines]}")

    def _read(self, path: Path) -> str | None:
        return path.read_text(encoding="utf-8") if path.is_file() else None

    @property
    def message(self) -> str | None:
        return self._read(self.opt_ml / "output" / "message")

    @property
    def failure(self) -> str | None:
        return self._read(self.opt_ml / "output" / "failure")

    @property
    def result_path(self) -> Path:
        return self.output_dir / RESULT_FILE

    @property
    def result(self) -> dict[str, Any] | None:
        """The parsed result file, or None when there is none (invalid JSON raises)."""
        text = self._read(self.result_path)
        return None if text is None else json.loads(text)

    def describe(self) -> str:
        """Everything about the run, for assertion messages."""
        return (
            f"args: {self.args}\nexit code: {self.returncode}\n--- stdout\n{self.stdout}"
            f"--- stderr\n{self.stderr}--- message\n{self.message}"
        )


@dataclass(frozen=True)
class Invocation:
    """One command line, ready to run: arguments and the whole environment."""

    args: tuple[str, ...]
    env: Mapping[str, str]
    opt_ml: Path
    output_dir: Path
    timeout: float = RUN_TIMEOUT

    def run(self) -> EvaluatorRun:
        """Run ``python -m container.cli *args`` from the repository root; arguments may hold
        non-UTF-8 bytes as surrogate escapes (``os.fsdecode``), which reach it as those bytes."""
        command = [sys.executable, "-m", "container.cli", *self.args]
        done = subprocess.run(
            command,
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            cwd=ROOT,
            env=dict(self.env),
            timeout=self.timeout,
        )
        return EvaluatorRun(
            list(self.args), done.returncode, done.stdout, done.stderr, self.opt_ml, self.output_dir
        )

    def start(self) -> subprocess.Popen[str]:
        """Start ``python -m container.cli *args`` without waiting: stdout and stderr are
        pipes (text), for tests that signal or kill the run."""
        return subprocess.Popen(
            [sys.executable, "-m", "container.cli", *self.args],
            cwd=ROOT,
            env=dict(self.env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def child_of(pid: int, *, timeout: float = 10.0) -> int:
    """The evaluation process that the supervisor ``pid`` started (from /proc)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                return int(entry.name)
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child")


def wait_until_sigterm_is_handled(pid: int, *, timeout: float = 20.0) -> None:
    """Wait until process ``pid`` catches SIGTERM (``SigCgt`` in /proc), which only the
    supervisor's first line does: the interpreter has started. (SIGINT is no marker: Python
    catches it from its own start, for KeyboardInterrupt.) Returns at once when the process is
    not visible here (gone, or in a remote Docker engine)."""
    import signal
    import time

    status = Path(f"/proc/{pid}/status")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            lines = status.read_text().splitlines()
        except OSError:
            return
        caught = next((line for line in lines if line.startswith("SigCgt:")), None)
        if caught is None or int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} never installed its SIGTERM handler")


def run_concurrently(
    invocations: Sequence[Invocation], *, workers: int = 2
) -> list[EvaluatorRun | Exception]:
    """Run independent invocations, ``workers`` at a time. Results in the given order; a run
    that could not finish (a timeout) gives its exception instead."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(invocation.run) for invocation in invocations]
    results: list[EvaluatorRun | Exception] = []
    for future in futures:
        error = future.exception()
        results.append(future.result() if error is None else error)
    return results


class EvaluatorCli:
    """Runs the command with ``<root>/opt_ml`` as its /opt/ml."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.opt_ml = root / "opt_ml"
        (self.opt_ml / "output").mkdir(parents=True, exist_ok=True)
        # <opt_ml>/processing exists, as on SageMaker: the default output folder is
        # <opt_ml>/processing/output/rule (elsewhere it would be ./rule-output)
        (self.opt_ml / "processing").mkdir(exist_ok=True)
        self.output_dir = self.opt_ml / "processing" / "output" / "rule"

    def env(
        self,
        extra: Mapping[str, str] | None = None,
        *,
        aws: bool = False,
        unset: Sequence[str] = (),
    ) -> dict[str, str]:
        """PATH and EVALUATOR_OPT_ML; with ``aws`` the test process's AWS_* variables; then
        ``extra``; minus the names in ``unset``."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "EVALUATOR_OPT_ML": str(self.opt_ml),
        }
        if aws:
            env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
        env.update(extra or {})
        for name in unset:
            env.pop(name, None)
        return env

    def command(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        aws: bool = False,
        unset: Sequence[str] = (),
        timeout: float = RUN_TIMEOUT,
    ) -> Invocation:
        """The invocation of ``rule-evaluator *args``, not run yet."""
        return Invocation(
            tuple(args), self.env(env, aws=aws, unset=unset), self.opt_ml, self.output_dir, timeout
        )

    def __call__(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        aws: bool = False,
        unset: Sequence[str] = (),
        timeout: float = RUN_TIMEOUT,
    ) -> EvaluatorRun:
        """Run ``rule-evaluator *args`` now."""
        return self.command(*args, env=env, aws=aws, unset=unset, timeout=timeout).run()

    def write_processing_config(self, text: str) -> Path:
        path = self.opt_ml / "config" / "processingjobconfig.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path


def copy_trial(source: Path, destination: Path) -> Path:
    """A writable copy of a fixture trial (so a run that wrote into it would show)."""
    shutil.copytree(source, destination)
    for folder, dirs, files in os.walk(destination):
        for name in [*dirs, *files]:
            os.chmod(os.path.join(folder, name), 0o755 if name in dirs else 0o644)
    os.chmod(destination, 0o755)
    return destination


def tree_snapshot(folder: Path) -> dict[str, tuple[str, int, int, str]]:
    """Every entry below ``folder``: relative path -> (kind, size, mtime_ns, sha256 of files)."""
    out: dict[str, tuple[str, int, int, str]] = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[path.relative_to(folder).as_posix()] = ("file", st.st_size, st.st_mtime_ns, digest)
        else:
            out[path.relative_to(folder).as_posix()] = ("dir", 0, st.st_mtime_ns, "")
    return out


def leftover_temporary_files(folders: Sequence[Path]) -> list[str]:
    """Files a crashed or careless atomic write would leave: ``*.tmp``, ``.*`` files, ``*~``."""
    found = []
    for folder in folders:
        if not folder.exists():
            continue
        for path in folder.rglob("*"):
            if path.is_file() and (
                path.name.endswith((".tmp", "~", ".part", ".partial")) or path.name.startswith(".")
            ):
                found.append(str(path))
    return found
