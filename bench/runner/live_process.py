"""The plumbing of a live run's processes: a bounded wait for the next JSON line a process
prints, the tail of its log, and stopping it."""

from __future__ import annotations

import json
import subprocess
import time
from typing import IO, Any


class LineQueue:
    """Lines of a process's stdout, read by a daemon thread, with a bounded wait for the next."""

    def __init__(self, stream: IO[str]) -> None:
        import queue
        import threading

        self._q: queue.Queue[str | None] = queue.Queue()
        self._empty = queue.Empty
        self.closed = False
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._q.put(line)
        finally:
            self._q.put(None)

    def get(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON line (None on timeout or at EOF; ``closed`` tells which)."""
        deadline = time.monotonic() + max(0.0, timeout)
        while not self.closed:
            try:
                line = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
            except self._empty:
                return None
            if line is None:
                self.closed = True
                return None
            line = line.strip()
            if line.startswith("{"):
                try:
                    found: dict[str, Any] = json.loads(line)
                    return found
                except ValueError:
                    pass
        return None


def wait_event(
    q: LineQueue, name: str, timeout: float, sink: list[dict[str, Any]]
) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not q.closed:
        msg = q.get(deadline - time.monotonic())
        if msg is None:
            continue
        sink.append(msg)
        if msg.get("event") in (name, "error"):
            return msg
    return None


def tail_of(path: str, n: int = 8) -> str:
    try:
        with open(path, errors="replace") as f:
            return "\n".join(f.read().strip().splitlines()[-n:])
    except OSError:
        return ""


def stop_process(proc: subprocess.Popen[str] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(10)
