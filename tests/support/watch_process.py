"""``rule-evaluator watch`` as a user starts it (a subprocess from the checkout), and a webhook
receiver on 127.0.0.1 that keeps every body POSTed to it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "WatchProcess", "final_result", "webhook_receiver"]

ROOT = Path(__file__).resolve().parents[2]


class _Receiver(BaseHTTPRequestHandler):
    posts: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).posts.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@contextmanager
def webhook_receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver on 127.0.0.1: its URL and the bodies POSTed to it, in order."""
    handler = type("Receiver", (_Receiver,), {"posts": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook", handler.posts
    finally:
        server.shutdown()
        server.server_close()


class WatchProcess:
    """``python -m container.cli watch ARGS --status-address 127.0.0.1:0``, its printed
    lines (in ``log``) and its status port."""

    def __init__(self, args: Sequence[str], log: Path, env: Mapping[str, str]) -> None:
        self.log = log
        command = [sys.executable, "-m", "container.cli", "watch", *args,
                   "--status-address", "127.0.0.1:0"]  # fmt: skip
        with open(log, "wb") as f:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env={**os.environ, **env}, stdout=f, stderr=subprocess.STDOUT
            )
        self.port = int(self.wait_for(r"status on port (\d+)", 60).group(1))

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            assert self.process.poll() is None, self.text()
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in:\n{self.text()}")

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            body: bytes = r.read()
            return body.decode()

    def terminate(self, signum: int = signal.SIGTERM) -> tuple[int, float]:
        """Send ``signum``; the exit code and the seconds it took to exit."""
        started = time.monotonic()
        self.process.send_signal(signum)
        code = self.process.wait(timeout=20)
        return code, time.monotonic() - started


def final_result(folder: Path, timeout: float) -> dict[str, Any]:
    """The result file a watched run wrote in ``folder``, once it holds a verdict (exit code 0
    or 1) and the report is there too; an AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            document = json.loads((folder / "rule_evaluation_result.json").read_text())
        except (OSError, ValueError):
            document = {}
        if document.get("exit_code") in (0, 1) and (folder / "rule_report.html").is_file():
            return dict(document)
        time.sleep(0.1)
    raise AssertionError(f"no verdict in {folder} within {timeout} s")
