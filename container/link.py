"""The pipe between the supervisor (``container.supervisor``) and the evaluation it runs.

The child writes one JSON object per line on the control pipe; the parent reads them:

==========  ==================================================================================
message     meaning
==========  ==================================================================================
ready       the child handles SIGTERM/SIGINT itself: the parent may forward them
outputs     where the run's files go (``result_dir``, ``message_dir``), the log format and level, and
            ``step_timeout`` (seconds a rule may spend on one step; null: no limit), and
            ``report`` (``html``: the supervisor writes the report of a run it ends), and
            ``webhook_url`` (the supervisor posts its last word there too, naming ``trial``)
untrusted   from here on rule code may run in the child (sent before any is loaded)
step        rule ``rule`` started its work at ``step`` (sent only when a limit is set)
idle        rule ``rule`` finished its work at ``step``
wait        no rule code of the ``rules`` listed runs (while so, every half ``step_timeout``,
            at least 0.5 s apart)
verdict     the run is over and its status files are written; ``exit_code`` is the run's
            (sent once: before the report is written, so the report never delays it)
==========  ==================================================================================

Rule code shares the child's process, so it can write on this pipe too. The supervisor takes
``ready``, ``outputs`` and a ``verdict`` only before ``untrusted`` (each once); after it, a
``verdict`` only says the child is done (the outcome comes from the result file), and ``step``
and ``idle`` only time the steps (see docs/reliability.md for what that leaves open).

The child's ends of four pipes arrive as inherited file descriptors named in the environment
variable ``EVALUATOR_SUPERVISOR_FDS`` (``control,stdout,stderr,log``). Once the configuration
is read, its stdout and stderr (whatever rule code prints) become the second and third, which
the parent turns into ``rule_output`` log lines, and its log goes to the fourth: from then on
the child holds no descriptor of the real stdout or stderr, and the parent is the log's only
writer (``container.log_relay`` says what it takes from the log pipe). Standard library only:
the parent imports this before anything else.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

__all__ = ["ENV_FDS", "MESSAGE_LIMIT", "ChildLink", "StepWatch", "parse_messages"]

ENV_FDS = "EVALUATOR_SUPERVISOR_FDS"


class ChildLink:
    """The child's end of the control pipe. Sending never raises: a parent that is gone (the
    pipe closed) makes every later message a no-op."""

    def __init__(self, control_fd: int, stdout_fd: int, stderr_fd: int, log_fd: int) -> None:
        self.control_fd = control_fd
        self.stdout_fd = stdout_fd
        self.stderr_fd = stderr_fd
        self.log_fd = log_fd
        self._lock = threading.Lock()
        self._closed = False
        self._verdict_sent = False

    @classmethod
    def from_environ(cls, environ: Any = None) -> ChildLink | None:
        """The link the supervisor set up for this process, or None (not supervised)."""
        value = (os.environ if environ is None else environ).get(ENV_FDS, "")
        try:
            control, out, err, log = (int(part) for part in value.split(","))
        except ValueError:
            return None
        return cls(control, out, err, log)

    def send(self, message: str, **fields: Any) -> None:
        """Send ``message``; the verdict is sent once (the command sends it before it writes
        the report, the process's end would send it again)."""
        data = (json.dumps({"m": message, **fields}, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._closed or (message == "verdict" and self._verdict_sent):
                return
            self._verdict_sent = self._verdict_sent or message == "verdict"
            try:
                os.write(self.control_fd, data)  # short lines: one write, never interleaved
            except OSError:
                self._closed = True

    def capture_output(self) -> tuple[int, int]:
        """Point file descriptors 1 and 2 at the output pipes, closing the real stdout and
        stderr; returns the log pipe, and a duplicate of the stderr pipe for our own last
        words."""
        err_fd = os.dup(self.stderr_fd)
        os.dup2(self.stdout_fd, 1)
        os.dup2(self.stderr_fd, 2)
        for fd in (self.stdout_fd, self.stderr_fd):
            os.close(fd)
        return self.log_fd, err_fd


class StepWatch:
    """Tells the supervisor when a rule starts and ends its work on a step, so it can end a run
    whose rule overran ``rule_step_timeout`` (the evaluation's ``watch``). While no rule code
    of a rule runs (between steps, waiting for data, or done), a thread says so (``wait``)
    every half ``step_timeout`` (at least ``HEARTBEAT`` seconds apart): the supervisor counts a
    rule whose ``idle`` is not followed by these within the limit (and a slack) as still in its
    step, so one forged ``idle`` cannot stop the clock. While every rule works, the thread
    sleeps."""

    HEARTBEAT = 0.5

    def __init__(self, link: ChildLink, step_timeout: float | None = None) -> None:
        self.link = link
        self.every = max(self.HEARTBEAT, (step_timeout or 0.0) / 2)
        self._steps: dict[str, int | None] = {}
        self._idle: set[str] = set()
        self._lock = threading.Condition(threading.Lock())  # notified as a rule goes idle
        self._thread = threading.Thread(target=self._beat, name="step-watch", daemon=True)
        self._thread.start()

    def begin(self, rule: str, step: int | None) -> None:
        with self._lock:
            self._steps[rule] = step
            self._idle.discard(rule)
        self.link.send("step", rule=rule, step=step)

    def end(self, rule: str) -> None:
        with self._lock:
            step = self._steps.get(rule)
            self._idle.add(rule)
            self._lock.notify_all()
        self.link.send("idle", rule=rule, step=step)

    def _beat(self) -> None:
        import time

        while True:
            with self._lock:
                self._lock.wait_for(lambda: bool(self._idle))
            time.sleep(self.every)
            with self._lock:
                idle = sorted(self._idle)
            if idle:
                self.link.send("wait", rules=idle)


#: The longest line the supervisor keeps on the control pipe (its messages are a few hundred
#: bytes). A longer one is dropped as it comes: the buffer never grows past this plus a read.
MESSAGE_LIMIT = 1 << 20
_DROPPED = b"\0"  # what is left of a line being dropped: no line starting so parses


def parse_messages(buffer: bytearray) -> list[dict[str, Any]]:
    """Take the complete lines out of ``buffer`` and parse them; a line that is not a JSON
    object is dropped (the child wrote it, not an attacker, but it decides nothing), and so
    is a line longer than ``MESSAGE_LIMIT``, as it comes (4 GiB without a newline cannot grow
    the supervisor: what is kept of it is one NUL byte until its newline arrives)."""
    messages: list[dict[str, Any]] = []
    while True:
        end = buffer.find(b"\n")
        if end < 0:
            if len(buffer) > MESSAGE_LIMIT:
                buffer[:] = _DROPPED
            return messages
        line = bytes(buffer[:end])
        del buffer[: end + 1]
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and isinstance(message.get("m"), str):
            messages.append(message)
