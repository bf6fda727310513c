"""``MotoServer``: a moto S3 server on 127.0.0.1 for ``--s3``, ``--live`` and ``--s3-cpu``,
started and stopped by the runner, with the environment a workload process needs to reach it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from typing import IO

from runner.common import WORK, log, rel


class MotoServer:
    def __init__(self, exe: str) -> None:
        self.exe = exe
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.logfile: IO[str] | None = None

    def __enter__(self) -> MotoServer:
        if not os.path.exists(self.exe):
            raise SystemExit(
                f"no moto_server at {self.exe} (the project's test extra installs moto[server])"
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        os.makedirs(WORK, exist_ok=True)
        logfile = self.logfile = open(os.path.join(WORK, "moto_server.log"), "w")
        proc = self.proc = subprocess.Popen(
            [self.exe, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=logfile,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise SystemExit(
                    f"moto_server exited with {proc.returncode}; see {rel(logfile.name)}"
                )
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("moto_server did not answer within 60 s") from None
                time.sleep(0.2)
        log(f"moto_server pid {proc.pid} on {self.url}")
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not (k.startswith("AWS_") or k.startswith("BOTO"))
        }
        env.update(
            {
                "AWS_ENDPOINT_URL": self.url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REGION": "us-east-1",
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true",
            }
        )
        return env

    def __exit__(self, *exc: object) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.logfile:
            self.logfile.close()
