"""The ``rule-evaluator`` process: a small supervisor, with the evaluation in a child process.

Whatever happens to the evaluation, a stop must never read as a verdict and rule code must not
decide the exit code. So the command's own process does little: it installs its SIGTERM/SIGINT
handlers before it imports anything else, starts ``container.child`` with the same arguments in
a process group of its own (``container.spawn``), and then

* forwards SIGTERM/SIGINT to the child once the child handles them (its ``ready`` message; a
  signal that came earlier waits for it), and kills the child's process group when it has not
  ended ``stop_grace`` seconds later (``EVALUATOR_STOP_GRACE``, default 8: inside the 10 s
  ``docker stop`` and Kubernetes give by default);
* reads the child's messages (``container.link``): where the status files are (taken only
  before rule code can run: then it opens those folders and holds them), when a rule works on
  a step (for ``rule_step_timeout``), and that the run is over;
* takes SIGTERM/SIGINT with ``sigtimedwait`` (they are blocked), so it knows who sent them:
  a signal from one of its own descendants (rule code) is logged and ignored;
* is the log's only writer: what the child's descriptors 1 and 2 receive (rule code
  printing) become ``rule_output`` lines, its log comes through a pipe
  (``container.log_relay``), and the verdict lines are its own (``container.verdict_lines``);
* reaps every process that ends, and once the child has ended kills every process left below
  it before it reads or writes the run's last word (``container.lifetime``);
* sleeps until something happens: one ``select`` on the child's pipes and on a descriptor
  that a pending SIGTERM, SIGINT or SIGCHLD makes readable (``container.wakeup``: they stay
  blocked, and are taken as above), with no timer unless a deadline is set (a stop's grace,
  a rule's step under ``rule_step_timeout``, a verdict's ``VERDICT_GRACE``, the pipes' drain
  after the child's exit), so an idle run costs no wakeups; where there is no such
  descriptor (not Linux) it looks every ``_TICK`` seconds;
* ends with the verdict it can verify (``evaluator.status.final``): before rule code could run
  (``untrusted`` not yet said: help, ``summary``, ``report``, a bad configuration) the child's
  ``verdict`` message; after, only a finished, consistent result file, read once nothing of
  the run is alive (the ``verdict`` message then only says the child is done: one that does not
  exit within ``VERDICT_GRACE`` seconds, a rule's thread keeping it alive, is killed).
  Otherwise it says the final status itself, through the run's sinks
  (``container.compose.final_sinks``: the message files, the result file, the report saying
  why, any registered output; no report after a stop): ``Stopped``, 143/130, once a stop signal came,
  whatever the child said or wrote; ``Error`` with a ClientError, 2, when a rule overran
  ``rule_step_timeout``; ``Error`` with an InternalServerError, 3, when the child died (a
  signal, the OOM killer), exited without a verdict (rule code calling ``os._exit``), or left a
  result file that cannot be taken.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # nothing more before the signal handlers are in (mypy only)
    from collections.abc import Sequence
    from types import FrameType
    from typing import Any

    from container.log_relay import LogRelay
    from container.output_lines import OutputLines

__all__ = ["main"]

DEFAULT_STOP_GRACE = 8.0
VERDICT_GRACE = 5.0  # after the verdict, how long the child may take to exit
DRAIN_SECONDS = 2.0  # after the child's exit, how long its pipes may stay open (grandchildren)
_TICK = 0.2
_WAIT_SLACK = 2.0  # an idle rule's heartbeats (every half the step limit) may be this late


_STOPS = (signal.SIGTERM, signal.SIGINT)
_WAKING = (*_STOPS, signal.SIGCHLD)  # blocked: the run's wait ends when one is pending
# si_code POLL_IN..POLL_HUP: a signal the kernel sends to the owner of a descriptor (F_SETOWN,
# F_SETSIG); no person or program stopping the run sends one (rule code armed it)
_ARMED_CODES = (1, 6)


def main(argv: Sequence[str] | None = None, *, fork: bool = False) -> int:
    """Run the command under supervision; the exit code (see the module docstring).
    ``fork``: this process has the evaluation loaded already (``container.forkserver``), so the
    child is forked from it rather than started as a new interpreter."""
    supervisor = _Supervisor(fork=fork)
    previous = {s: signal.signal(s, supervisor.on_signal) for s in _STOPS}
    # taken with their sender (sigtimedwait); SIGCHLD too: pending, they wake the run's wait
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAKING)
    try:
        return supervisor.run(list(sys.argv[1:] if argv is None else argv))
    except Exception as e:  # our bug: never exit 1, which means "a rule fired"
        import traceback

        traceback.print_exc()
        print(
            f"InternalServerError: the supervisor failed: {type(e).__name__}: {e}", file=sys.stderr
        )
        return 3
    finally:
        supervisor.take_signals()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WAKING)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Supervisor:
    def __init__(self, *, fork: bool = False) -> None:
        self.fork = fork
        self.pid: int | None = None
        self.ready = False
        self.stops: list[int] = []
        self.stop_deadline: float | None = None
        # What the child said: where its files are, which rule works on which step since
        # when, its verdict; and how it ended.
        self.state: dict[str, Any] = {}
        self.busy: dict[str, tuple[Any, float]] = {}
        self.waiting: dict[str, tuple[Any, float]] = {}  # idle rules: last step, last heard
        self.verdict: int | None = None
        self.verdict_at: float | None = None
        self.overrun: tuple[str, Any, float] | None = None
        self.untrusted = False  # rule code may have run: messages decide nothing
        self.outputs_taken = False
        self.result_fd: int | None = None  # the output folder, opened before rule code ran
        self.message_fd: int | None = None
        self.reaped: set[int] = set()
        self.lines: OutputLines | None = None
        self.namespaced = False  # the evaluation is pid 1 of a PID namespace of its own
        self.filtered = False  # the child's seccomp filter (container.confine) was built
        self.survivors = False  # a process of the run could not be ended

    # ---- signals -------------------------------------------------------------------------

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stop(signum)  # (before the signals were blocked)

    def _stop(self, signum: int) -> None:
        self.stops.append(signum)
        if self.pid is not None and self.ready:
            self._send(signum)

    def take_signals(self) -> None:
        """Take the pending SIGTERM/SIGINT: a stop, unless a descendant of ours (rule code)
        sent it, which is logged and ignored."""
        while True:
            try:
                info = signal.sigtimedwait(_STOPS, 0)
            except InterruptedError:
                continue
            if info is None:
                return
            sender = info.si_pid
            if _ARMED_CODES[0] <= info.si_code <= _ARMED_CODES[1]:
                self._ignored(info.si_signo, sender, "sent by the kernel for a descriptor's owner")
                continue
            if sender > 0 and self._ours(sender):
                self._ignored(info.si_signo, sender, "sent by a process of the evaluation")
                continue
            if self.lines is not None:  # when, and who: what a user asks of a stopped run
                name = signal.Signals(info.si_signo).name
                self.lines.log("stop_requested", "info", signal=name, sender_pid=sender)
            self._stop(info.si_signo)

    def _ignored(self, signum: int, sender: int, reason: str) -> None:
        if self.lines is not None:
            name = signal.Signals(signum).name
            self.lines.log(
                "signal_ignored", "warning", signal=name, sender_pid=sender, reason=reason
            )

    def _ours(self, pid: int) -> bool:
        from container.lifetime import is_descendant

        return pid == self.pid or pid in self.reaped or is_descendant(pid)

    def _send(self, signum: int) -> None:
        if self.pid is None:
            return  # (os.kill(0, ...) would signal our own group)
        try:
            os.kill(self.pid, signum)
        except OSError:
            pass  # already gone

    def _kill_group(self) -> None:
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass

    # ---- the run -------------------------------------------------------------------------

    def run(self, args: list[str]) -> int:
        import time

        from container.lifetime import become_subreaper, kill_descendants, none_left
        from container.log_relay import LogRelay
        from container.output_lines import OutputLines
        from container.spawn import start_child
        from container.wakeup import SignalWakeup, drain

        opt_ml = os.environ.get("EVALUATOR_OPT_ML", "/opt/ml")
        grace = _seconds(os.environ.get("EVALUATOR_STOP_GRACE"), None) or DEFAULT_STOP_GRACE
        become_subreaper()
        self.message_fd = _open_folder(f"{opt_ml}/output")
        try:
            started = start_child(args, _WAKING, fork=self.fork)
        except OSError as e:
            from container.last_word import cannot_start

            return cannot_start(e, self.message_fd)
        self.pid, self.namespaced, self.filtered = started.pid, started.namespaced, started.filtered
        open_fds = dict(started.pipes)
        control = bytearray()
        outputs = self.lines = OutputLines()
        relay = LogRelay(outputs)
        exit_status: int | None = None
        exited_at: float | None = None
        wakeup = SignalWakeup.open(_WAKING)
        while True:
            self.take_signals()
            if self.stops and self.stop_deadline is None:
                self.stop_deadline = time.monotonic() + grace
                if self.ready:
                    self._send(self.stops[0])
            readable = _wait(open_fds, wakeup, self._wait_seconds(time.monotonic(), exited_at))
            for fd in sorted(readable, key=lambda fd: open_fds[fd] != "control"):
                self._read_pipe(fd, open_fds, control, outputs, relay)
            drain((signal.SIGCHLD,))  # before the reaping: a later end wakes the next wait
            exit_status = self._reap(exit_status)
            now = time.monotonic()
            if exit_status is not None and exited_at is None:
                exited_at = now
                self._kill_group()
                self.reaped.update(kill_descendants())  # whatever rule code left behind
            if exited_at is None:
                self._enforce_deadlines(now)
            elif not open_fds or now - exited_at > DRAIN_SECONDS:
                break
        if wakeup is not None:
            wakeup.close()
        for fd in list(open_fds):
            os.close(fd)
        outputs.flush("stdout")
        outputs.flush("stderr")
        relay.flush(trusted=not self.untrusted)
        self.reaped.update(kill_descendants())  # none may outlive the last word
        self.survivors = not none_left()
        self.take_signals()
        # Every process of the run is dead: nothing can race the last word's writes.
        code = self._conclude(exit_status or 0)
        if self.outputs_taken:
            from container.verdict_lines import say_verdict

            say_verdict(outputs, self.state, self.result_fd, code)
        return code

    def _read_pipe(
        self,
        fd: int,
        open_fds: dict[int, str],
        control: bytearray,
        outputs: OutputLines,
        relay: LogRelay,
    ) -> None:
        """Take what the child's pipe ``fd`` holds: control messages, its log (``relay``),
        or what rule code printed; a pipe whose end closed is closed and dropped."""
        kind = open_fds.get(fd)
        if kind is None:
            return  # (the control pipe, closed while a log read took it)
        data = os.read(fd, 65536)
        if kind == "log":  # what the child said before these bytes decides their trust
            self._take_control_now(open_fds, control, outputs)
        if not data:  # the child's end closed
            del open_fds[fd]
            os.close(fd)
            if kind == "log":
                relay.flush(trusted=not self.untrusted)
            elif kind != "control":
                outputs.flush(kind)
        elif kind == "log":
            relay.feed(data, trusted=not self.untrusted)
        elif kind != "control":
            outputs.feed(kind, data)
        else:
            self._take_control(data, control, outputs)

    def _take_control(self, data: bytes, buffer: bytearray, outputs: OutputLines) -> None:
        import time

        from container.link import parse_messages

        buffer += data
        for message in parse_messages(buffer):
            self._on_message(message, outputs, time.monotonic())

    def _take_control_now(
        self, open_fds: dict[int, str], buffer: bytearray, outputs: OutputLines
    ) -> None:
        """Read what waits on the control pipe (``untrusted`` written before a log line
        decides how that line is taken)."""
        import select

        fd = next((fd for fd, kind in open_fds.items() if kind == "control"), None)
        while fd is not None and select.select([fd], [], [], 0)[0]:
            data = os.read(fd, 65536)
            if not data:
                del open_fds[fd]
                os.close(fd)
                return
            self._take_control(data, buffer, outputs)

    def _on_message(self, message: dict[str, Any], outputs: OutputLines, now: float) -> None:
        kind = message["m"]
        if kind == "step":
            self.busy[str(message.get("rule"))[:256]] = (message.get("step"), now)
        elif kind == "idle":
            busy = self.busy.get(str(message.get("rule")))
            if busy is not None and busy[0] == message.get("step"):
                self.waiting[str(message.get("rule"))] = (busy[0], now)
                del self.busy[str(message.get("rule"))]
        elif kind == "wait" and isinstance(message.get("rules"), list):
            for rule in message["rules"]:
                if isinstance(rule, str) and rule in self.waiting:
                    self.waiting[rule] = (self.waiting[rule][0], now)
        elif kind == "verdict" and self.untrusted:
            self.verdict_at = self.verdict_at or now  # the child is done: only a hint
        elif self.untrusted:
            return  # rule code may have written it: nothing else is taken any more
        elif kind == "ready" and not self.ready:
            self.ready = True
            if self.stops:
                self._send(self.stops[0])  # a stop that came before the child could take it
        elif kind == "outputs" and not self.outputs_taken:
            self.outputs_taken = True
            self.state.update(message)
            outputs.log_format = "console" if message.get("log_format") == "console" else "json"
            outputs.log_level = str(message.get("log_level", "INFO")).upper()
            self._log_confinement(outputs)
            folder = message.get("result_dir")
            self.result_fd = _open_folder(folder) if isinstance(folder, str) else None
            folder = message.get("message_dir")
            _close(self.message_fd)
            self.message_fd = _open_folder(folder) if isinstance(folder, str) else None
        elif kind == "untrusted":
            self.untrusted = True
        elif kind == "verdict" and type(message.get("exit_code")) is int:
            self.verdict, self.verdict_at = message["exit_code"], now

    def _log_confinement(self, outputs: OutputLines) -> None:
        """The run's first line: what confines rule code here (``container.spawn``)."""
        from container.spawn import confinement_fields

        outputs.log("run_confinement", "info", **confinement_fields(self.namespaced, self.filtered))

    def _enforce_deadlines(self, now: float) -> None:
        """Kill the child's group when a rule step overran rule_step_timeout, when a stop's
        grace period is over, or when the child lingers after its verdict."""
        limit = _seconds(self.state.get("step_timeout"), None)
        if limit is not None and self.overrun is None:
            # In its step since `since`; or said idle, but not heard from since (see link).
            late = [(r, s, now - t - limit) for r, (s, t) in self.busy.items()]
            late += [(r, s, now - t - limit - _WAIT_SLACK) for r, (s, t) in self.waiting.items()]
            for rule, step, over in late:
                if over > 0:
                    self.overrun = (rule, step, limit)
                    self._kill_group()
                    break
        if self.stop_deadline is not None and now > self.stop_deadline:
            self._kill_group()
        if self.verdict_at is not None and now - self.verdict_at > VERDICT_GRACE:
            self._kill_group()

    def _wait_seconds(self, now: float, exited_at: float | None) -> float | None:
        """How long the run's wait may last: until the next deadline (``_enforce_deadlines``,
        the pipes' drain after the child's exit); ``_TICK`` once one has passed (its kill is
        done: the next look is the one it always had); None (no limit) when none is set."""
        deadlines = [self.stop_deadline]
        if exited_at is not None:
            deadlines.append(exited_at + DRAIN_SECONDS)
        if self.verdict_at is not None:
            deadlines.append(self.verdict_at + VERDICT_GRACE)
        limit = _seconds(self.state.get("step_timeout"), None)
        if limit is not None and self.overrun is None:
            deadlines += [t + limit for _, t in self.busy.values()]
            deadlines += [t + limit + _WAIT_SLACK for _, t in self.waiting.values()]
        waits = [d - now if d > now else _TICK for d in deadlines if d is not None]
        return min(waits, default=None)

    def _reap(self, exit_status: int | None) -> int | None:
        """Collect every ended child (orphans included); the evaluation child's wait status
        once it has ended."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return exit_status
            if pid == 0:
                return exit_status
            self.reaped.add(pid)
            if pid == self.pid:
                exit_status = status

    def _conclude(self, wait_status: int) -> int:
        from container.compose import final_sinks
        from container.last_word import conclude

        folder = self.state.get("result_dir")
        return conclude(
            stops=self.stops,
            overrun=self.overrun,
            untrusted=self.untrusted,
            verdict=self.verdict,
            said_done=self.verdict_at is not None,
            result_fd=self.result_fd,
            message_fd=self.message_fd,
            wait_status=wait_status,
            survivors=self.survivors,
            sinks=final_sinks(self.state, self.result_fd, self.message_fd),
            result_dir=folder if isinstance(folder, str) else None,
        )


def _wait(open_fds: dict[int, str], wakeup: Any, timeout: float | None) -> list[int]:
    """Wait for the child's pipes or a pending signal (``wakeup``, a
    ``container.wakeup.SignalWakeup``), ``timeout`` seconds at most (None: no limit); the
    readable pipes. Without a wakeup descriptor the wait is ``_TICK`` at most."""
    import select
    import time

    if wakeup is None:
        timeout = _TICK if timeout is None else min(timeout, _TICK)
    fds = [*open_fds, wakeup.fd] if wakeup is not None else list(open_fds)
    if not fds:
        time.sleep(timeout or 0.0)
        return []
    try:
        readable = select.select(fds, [], [], timeout)[0]
    except InterruptedError:
        return []
    return [fd for fd in readable if fd in open_fds]


def _seconds(value: Any, default: float | None) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return default
    return seconds if seconds > 0 else default


def _open_folder(path: str) -> int | None:
    """A held file descriptor of a folder the configuration named, or None."""
    from evaluator.fileio import open_folder

    try:
        return open_folder(path)
    except (OSError, ValueError):
        return None


def _close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)
