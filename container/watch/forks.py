"""The watch's end of the fork server (``container.forkserver``, started as a process of its
own: this module never imports it, the watch holds no rule code).

``ForkServer.start`` asks the server for one run's processes (or a shared worker's, its control
socket handed over as the worker's stdin) and returns the pid of the supervisor;
``last_word`` forks the last word of a run whose worker died; ``poll`` takes what the server
said since (which runs ended, with their exit
codes). A server that is gone (killed, crashed) ends every run it had, each with
``LOST_CODE`` (that run's ``Error``, its result file resumed by the next watch); the next
``start`` starts a new server.
"""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["LOST_CODE", "ForkServer", "read_json_lines"]

LOST_CODE = -int(signal.SIGKILL)  # a run whose server went away: as if it were killed
_BOOT = "import sys; del sys.path[0]; from container.forkserver import main; sys.exit(main())"
_ANSWER_SECONDS = 120.0  # the first answer waits for the server to load the evaluator


class ForkServer:
    """One fork server process, started on first use."""

    def __init__(self, *, preload: Sequence[str] = ()) -> None:
        self._preload = tuple(preload)  # modules the server loads besides its own list
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._count = 0
        self.live: set[int] = set()  # runs started and not ended
        self.ended: dict[int, int] = {}  # pid -> exit code, until taken by ``exit_code``

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        log: str,
        *,
        channel: socket.socket | None = None,
    ) -> int:
        """Fork one run (``rule-evaluator ARGV``); its supervisor's pid. ``channel``: the
        run's stdin (a shared worker's control socket). OSError: it could not."""
        fds = () if channel is None else (channel.fileno(),)
        fields = {"argv": list(argv), "env": dict(env), "log": log, "channel": bool(fds)}
        return self._fork("start", fields, fds)

    def last_word(
        self,
        state: Mapping[str, Any],
        env: Mapping[str, str],
        log: str,
        *,
        why: str,
        stops: Sequence[int] = (),
    ) -> int:
        """Fork the last word of a run whose shared worker died before the run's verdict
        (``state``: the run's ``outputs``, ``container.link``); the pid, ended as a run's
        supervisor is, with the run's exit code. OSError: it could not."""
        fields = {"state": dict(state), "env": dict(env), "log": log, "why": why,
                  "stops": list(stops)}  # fmt: skip
        return self._fork("last_word", fields, ())

    def _fork(self, kind: str, fields: dict[str, Any], fds: Sequence[int]) -> int:
        if self._sock is None or not self._running():
            self._begin()
        self._count += 1
        self._send({kind: self._count, **fields}, fds)
        deadline = time.monotonic() + _ANSWER_SECONDS
        while time.monotonic() < deadline:
            for answer in self._read(deadline - time.monotonic()):
                if answer.get("started") == self._count:
                    self.live.add(int(answer["pid"]))
                    return int(answer["pid"])
                if answer.get("failed") == self._count:
                    raise OSError(str(answer.get("error")))
            if not self._running():
                break
        self._lose()
        raise OSError("the fork server did not answer")

    def poll(self) -> None:
        """Take what the server said; when it is gone, every run it had has ended."""
        if self._sock is None:
            return
        self._read(0)
        if not self._running():
            self._read(0)
            self._lose()

    def exit_code(self, pid: int) -> int | None:
        """The run's exit code once it has ended (``Popen.returncode``'s convention), given
        once."""
        return self.ended.pop(pid, None)

    def signal(self, pid: int, signum: int) -> None:
        if pid in self.live:
            self._send({"signal": pid, "signum": int(signum)})

    def kill(self, pids: Iterable[int], timeout: float = 5.0) -> None:
        """SIGKILL to those runs' process groups at once; wait (``timeout`` at most) until the
        server has reaped them."""
        pids = set(pids) & self.live
        if not pids:
            return
        self._send({"kill": sorted(pids)})
        deadline = time.monotonic() + timeout
        while pids & self.live and time.monotonic() < deadline:
            self._read(0.1)
            if not self._running():
                self._lose()

    def close(self) -> None:
        """End the server: it kills what it still runs."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._process is not None:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._lose()

    # ---- the socket ---------------------------------------------------------------------

    def _begin(self) -> None:
        self._lose()
        ours, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), *self._preload],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        self._sock, self._buffer = ours, b""

    def _running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _send(self, fields: dict[str, Any], fds: Sequence[int] = ()) -> None:
        if self._sock is None:
            return
        data = (json.dumps(fields) + "\n").encode()
        try:
            if fds:  # the descriptors come with the line's first byte
                sent = socket.send_fds(self._sock, [data], list(fds))
                data = data[sent:]
            self._sock.sendall(data)
        except OSError:
            pass  # the server is gone: poll says so

    def _read(self, timeout: float) -> list[dict[str, Any]]:
        """What the server said within ``timeout`` seconds (the ended runs recorded)."""
        if self._sock is None:
            return []
        answers, self._buffer = read_json_lines(self._sock, self._buffer, timeout)
        for answer in answers:
            if "ended" in answer:
                self.live.discard(int(answer["ended"]))
                self.ended[int(answer["ended"])] = int(answer["code"])
        return answers

    def _lose(self) -> None:
        """The server is gone: every run it had has ended, killed with it."""
        for pid in self.live:
            self.ended[pid] = LOST_CODE
        self.live.clear()
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def read_json_lines(
    sock: socket.socket, buffer: bytes, timeout: float = 0.0
) -> tuple[list[dict[str, Any]], bytes]:
    """The JSON lines ``sock`` sent within ``timeout`` seconds (and what followed at once),
    after ``buffer``, the start of a line read before; and the start of the next line. A line
    that is not a JSON object is left out."""
    while select.select([sock], [], [], max(0.0, timeout))[0]:
        try:
            data = sock.recv(1 << 20)
        except OSError:
            data = b""
        if not data:
            break
        buffer += data
        timeout = 0.0
    *lines, rest = buffer.split(b"\n")
    found: list[dict[str, Any]] = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found, rest
