"""Run the image as users do (the ``docker`` command) and the plain ``rule-evaluator`` command
beside it, and compare what each leaves behind.

``Docker`` wraps the CLI (``DOCKER_HOST``, contexts and the default socket work as for any
``docker`` command). ``Layout`` is one run's folders on the host: an ``opt_ml`` tree whose
``output`` and ``processing/output/rule`` folders are mounted at the same places under
``/opt/ml`` in the container (and given as ``EVALUATOR_OPT_ML`` to the plain command), plus
extra read-only mounts. ``comparable`` strips what must differ between the two runs: times and
the host paths of the mounts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ROOT",
    "S3_CREDENTIALS",
    "SIZE_TARGET_MB",
    "Docker",
    "DockerUnavailable",
    "Image",
    "Layout",
    "Outcome",
    "comparable",
    "live_trial",
    "run_plain",
]

ROOT = Path(__file__).resolve().parents[2]
OPT_ML = "/opt/ml"
TENSORS = f"{OPT_ML}/processing/input/tensors"
RESULT_FILE = "rule_evaluation_result.json"
RUN_TIMEOUT = 120.0
# About 332 MB (docs/container.md): 208 MB, and 124 MB of MLflow's client and SQL store (the
# mlflow extra: the image reads MLflow runs). The report's charts are drawn in the browser (no
# matplotlib, 97 MB), botocore's unused service models leave (-24 MB).
SIZE_TARGET_MB = 350
# Fake, distinctive: the tests prove they never appear in the container's output.
S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIACONTAINERTEST000",
    "AWS_SECRET_ACCESS_KEY": "container-secret-must-never-be-printed",
}


class DockerUnavailable(Exception):
    """No docker command, or no engine answers it."""


@dataclass(frozen=True)
class Image:
    """The image under test and what ``docker image inspect`` says of it."""

    name: str
    config: dict[str, Any]
    build_seconds: float | None

    @property
    def size_mb(self) -> float:
        return float(self.config["Size"]) / 1e6


@dataclass
class Outcome:
    """What one run (container or plain command) produced."""

    returncode: int
    stdout: str
    stderr: str
    layout: Layout

    @property
    def message(self) -> str | None:
        return _read(self.layout.opt_ml / "output" / "message")

    @property
    def failure(self) -> str | None:
        return _read(self.layout.opt_ml / "output" / "failure")

    @property
    def result(self) -> dict[str, Any] | None:
        text = _read(self.layout.output / RESULT_FILE)
        return None if text is None else json.loads(text)

    def lines(self) -> list[dict[str, Any]]:
        """Every JSON log line, in order (rule code's own prints and partial lines left out)."""
        found = []
        for line in self.stdout.splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return found

    def statuses(self) -> list[str]:
        """The ``status`` of every ``rule_status`` log line, in order."""
        return [line["status"] for line in self.lines() if line.get("event") == "rule_status"]

    def describe(self) -> str:
        return (
            f"exit code {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n"
            f"{self.stderr}\n--- message\n{self.message}"
        )


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


@dataclass
class Layout:
    """One run's folders: ``<root>/opt_ml/{output,processing/output/rule}`` (writable by any
    user, as the container's user is not the host's), and read-only mounts
    ``{host path: container path}``."""

    root: Path
    mounts: dict[Path, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for folder in (self.opt_ml / "output", self.output):
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(0o777)

    @property
    def opt_ml(self) -> Path:
        return self.root / "opt_ml"

    @property
    def output(self) -> Path:
        return self.opt_ml / "processing" / "output" / "rule"

    def mount_tensors(self, trial: Path) -> None:
        """The trial at /opt/ml/processing/input/tensors: mounted in the container, a link
        under ``opt_ml`` for the plain command (which then finds it the same way)."""
        self.mounts[trial] = TENSORS
        link = self.opt_ml / "processing" / "input" / "tensors"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(trial.resolve(), target_is_directory=True)

    def host_to_container(self) -> dict[str, str]:
        """Host path prefixes and what they are in the container, longest first."""
        pairs = {str(self.opt_ml): OPT_ML, str(self.opt_ml.resolve()): OPT_ML}
        pairs.update({str(host.resolve()): inside for host, inside in self.mounts.items()})
        return dict(sorted(pairs.items(), key=lambda kv: -len(kv[0])))


# Result keys that differ from run to run: times and rates.
_TIMING_KEYS = ("_at", "_seconds", "_ms", "duration", "elapsed", "per_second")
# A digest of the trial path among others: the host's path and the container's differ.
_PATH_DIGESTS = ("run_key",)


def comparable(result: Mapping[str, Any] | None, layout: Layout) -> Any:
    """The result document without times and path digests, with host paths written as
    container paths."""
    replacements = layout.host_to_container()

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: clean(v)
                for k, v in value.items()
                if not k.endswith(_TIMING_KEYS) and k not in _PATH_DIGESTS
            }
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str):
            for host, inside in replacements.items():
                value = value.replace(host, inside)
        return value

    return clean(result)


def run_plain(
    layout: Layout,
    *,
    env: Mapping[str, str],
    args: Sequence[str] = (),
    timeout: float = RUN_TIMEOUT,
) -> Outcome:
    """The ``rule-evaluator`` command on the host, with ``layout.opt_ml`` as its /opt/ml and
    the container paths in ``env`` and ``args`` mapped back to the host's."""
    back = {inside: host for host, inside in layout.host_to_container().items()}
    back[OPT_ML] = str(layout.opt_ml)

    def to_host(value: str) -> str:
        for inside, host in sorted(back.items(), key=lambda kv: -len(kv[0])):
            if value == inside or value.startswith(inside + "/"):
                return host + value[len(inside) :]
        return value

    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "EVALUATOR_OPT_ML": str(layout.opt_ml),
    }
    full_env.update({k: to_host(v) for k, v in env.items()})
    done = subprocess.run(
        [sys.executable, "-m", "container.cli", *[to_host(a) for a in args]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full_env,
        timeout=timeout,
    )
    return Outcome(done.returncode, done.stdout, done.stderr, layout)


class Docker:
    """The docker command, checked once."""

    def __init__(self) -> None:
        self.command = shutil.which("docker")
        if self.command is None:
            raise DockerUnavailable("there is no docker command on PATH")
        where = (
            f"DOCKER_HOST={os.environ['DOCKER_HOST']}"
            if os.environ.get("DOCKER_HOST")
            else "the default socket (/var/run/docker.sock or the current docker context)"
        )
        try:
            done = self("version", "--format", "{{.Server.Version}}", timeout=30, check=False)
        except subprocess.TimeoutExpired:
            raise DockerUnavailable(f"no Docker engine answered at {where} within 30 s") from None
        if done.returncode != 0:
            detail = done.stderr.strip().splitlines()[-1:] or ["no output"]
            raise DockerUnavailable(f"no Docker engine answers at {where}: {detail[0]}")
        self.server_version = done.stdout.strip()
        self.where = where

    def __call__(
        self,
        *args: str,
        timeout: float = RUN_TIMEOUT,
        check: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        assert self.command is not None
        full_env = {**os.environ, **(env or {})}
        done = subprocess.run(
            [self.command, *args], capture_output=True, text=True, timeout=timeout, env=full_env
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"docker {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done

    def popen(self, *args: str) -> subprocess.Popen[str]:
        assert self.command is not None
        return subprocess.Popen(
            [self.command, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def image_config(self, image: str) -> dict[str, Any]:
        data: list[dict[str, Any]] = json.loads(self("image", "inspect", image).stdout)
        return data[0]

    def run_options(
        self, layout: Layout, *, env: Mapping[str, str] = {}, pass_env: Sequence[str] = ()
    ) -> list[str]:
        """``-v`` and ``-e`` options: the layout's folders at their /opt/ml places, its
        read-only mounts, ``env`` as ``-e NAME=VALUE`` and ``pass_env`` as ``-e NAME`` (the
        value comes from this process: credentials stay off the command line)."""
        options = [
            "-v",
            f"{layout.opt_ml / 'output'}:{OPT_ML}/output",
            "-v",
            f"{layout.output}:{OPT_ML}/processing/output/rule",
        ]
        for host, inside in layout.mounts.items():
            options += ["-v", f"{host.resolve()}:{inside}:ro"]
        config = layout.opt_ml / "config"
        if config.is_dir():
            options += ["-v", f"{config}:{OPT_ML}/config:ro"]
        for name, value in env.items():
            options += ["-e", f"{name}={value}"]
        for name in pass_env:
            options += ["-e", name]
        return options

    def run(
        self,
        image: str,
        layout: Layout,
        *,
        env: Mapping[str, str] = {},
        pass_env: Sequence[str] = (),
        options: Sequence[str] = (),
        args: Sequence[str] = (),
        secrets: Mapping[str, str] | None = None,
        timeout: float = RUN_TIMEOUT,
    ) -> Outcome:
        """``docker run --rm`` the image to completion; ``secrets`` are values for the
        ``pass_env`` names, given to the docker command's environment only."""
        command = [
            "run",
            "--rm",
            *self.run_options(layout, env=env, pass_env=pass_env),
            *options,
            image,
            *args,
        ]
        done = self(*command, timeout=timeout, check=False, env=secrets)
        return Outcome(done.returncode, done.stdout, done.stderr, layout)

    def wait_for_line(self, container: str, needle: str, *, timeout: float = 60.0) -> str:
        """Follow the container's log until a line holds ``needle``; the log so far."""
        follow = self.popen("logs", "--follow", container)
        seen: list[str] = []
        timer = threading.Timer(timeout, follow.kill)  # ends the loop if the line never comes
        timer.start()
        try:
            assert follow.stdout is not None
            for line in follow.stdout:
                seen.append(line)
                if needle in line:
                    return "".join(seen)
        finally:
            timer.cancel()
            follow.kill()
            follow.wait()
        raise AssertionError(
            f"{needle!r} never appeared in the log of {container}:\n" + "".join(seen)
        )


def live_trial(folder: Path) -> Path:
    """A trial still being written: three steps, no end marker."""
    import numpy as np

    from evaluator.formats import Collection
    from evaluator.modes import ModeKeys
    from evaluator.testing import TrialWriter

    writer = TrialWriter(folder)
    writer.write_collections([Collection("gradients", include_regex=["^g"])])
    for step in range(3):
        writer.write_step(step, {"g": np.ones(4, np.float32)}, mode=ModeKeys.TRAIN)
    return folder
