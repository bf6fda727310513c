"""The ``rule-evaluator`` process: a small supervisor, with the evaluation in a child process.

Whatever happens to the evaluation, a stop must never read as a verdict and rule code must not
decide the exit code. So the command's own process does little: it installs its SIGTERM/SIGINT
handlers before it imports anything else, starts ``container.child`` with the same arguments in
a process group of its own, and then

* forwards SIGTERM/SIGINT to the child once the child handles them (its ``ready`` message; a
  signal that came earlier waits for it), and kills the child's process group when it has not
  ended ``stop_grace`` seconds later (``EVALUATOR_STOP_GRACE``, default 8: inside the 10 s
  ``docker stop`` and Kubernetes give by default);
* reads the child's messages (``container.link``): where the status files are, when a rule
  works on a step (for ``rule_step_timeout``), and the verdict;
* turns what the child's file descriptors 1 and 2 receive (rule code printing) into
  ``rule_output`` log lines, so nothing else reaches the JSON-lines stream;
* reaps every process that ends (it is PID 1 in a container, where orphans come to it);
* ends with the child's verdict (once the verdict is in, a child that does not exit within
  ``VERDICT_GRACE`` seconds, a rule's thread keeping it alive, is killed). Without a verdict it
  writes the final status itself (``evaluator.status.final``): ``Stopped``, 143/130, after a stop
  signal; ``Error`` with a ClientError, 2, when a rule overran ``rule_step_timeout``;
  ``Error`` with an InternalServerError, 3, when the child died (a signal, the OOM killer) or
  exited without a verdict (rule code calling ``os._exit``).
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

__all__ = ["main"]

DEFAULT_STOP_GRACE = 8.0
VERDICT_GRACE = 5.0  # after the verdict, how long the child may take to exit
DRAIN_SECONDS = 2.0  # after the child's exit, how long its pipes may stay open (grandchildren)
_TICK = 0.2
_LINE_LIMIT = 64 * 1024  # a longer line without a newline is passed on in pieces

# The child: this package's ``container.child`` with the interpreter running us, started with
# the script folder or working directory left out of the import path (a folder named like one
# of our packages there must not replace it).
_BOOT = "import sys; del sys.path[0]; from container.child import main; sys.exit(main())"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command under supervision; the exit code (see the module docstring)."""
    supervisor = _Supervisor()
    previous = {s: signal.signal(s, supervisor.on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
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
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Supervisor:
    def __init__(self) -> None:
        self.pid: int | None = None
        self.ready = False
        self.stops: list[int] = []
        self.stop_deadline: float | None = None
        # What the child said: where its files are, which rule works on which step since
        # when, its verdict; and how it ended.
        self.state: dict[str, Any] = {}
        self.busy: dict[str, tuple[Any, float]] = {}
        self.verdict: int | None = None
        self.verdict_at: float | None = None
        self.overrun: tuple[str, Any, float] | None = None

    # ---- signals -------------------------------------------------------------------------

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stops.append(signum)
        if self.pid is not None and self.ready:
            self._send(signum)

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
        import select
        import subprocess
        import time

        from container.link import ENV_FDS, parse_messages

        opt_ml = os.environ.get("EVALUATOR_OPT_ML", "/opt/ml")
        grace = _seconds(os.environ.get("EVALUATOR_STOP_GRACE"), DEFAULT_STOP_GRACE)
        self.state["message_dir"] = f"{opt_ml}/output"
        control_r, control_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        env = dict(os.environ)
        env[ENV_FDS] = f"{control_w},{out_w},{err_w}"
        try:
            child = subprocess.Popen(
                [sys.executable, "-c", _BOOT, *args],
                pass_fds=(control_w, out_w, err_w),
                env=env,
                process_group=0,
            )
        except OSError as e:
            return _cannot_start(e, opt_ml)
        self.pid = child.pid
        for fd in (control_w, out_w, err_w):
            os.close(fd)

        control = bytearray()
        outputs = _OutputLines()
        open_fds = {control_r: "control", out_r: "stdout", err_r: "stderr"}
        exit_status: int | None = None
        exited_at: float | None = None
        while True:
            if self.stops and self.stop_deadline is None:
                self.stop_deadline = time.monotonic() + grace
                if self.ready:
                    self._send(self.stops[0])
            try:
                readable = select.select(list(open_fds), [], [], _TICK)[0] if open_fds else []
            except InterruptedError:
                readable = []
            if not open_fds:
                time.sleep(_TICK)
            for fd in readable:
                data = os.read(fd, 65536)
                kind = open_fds[fd]
                if not data:  # the child's end closed
                    del open_fds[fd]
                    os.close(fd)
                    if kind != "control":
                        outputs.flush(kind)
                elif kind != "control":
                    outputs.feed(kind, data)
                else:
                    control += data
                    for message in parse_messages(control):
                        self._on_message(message, outputs, time.monotonic())
            exit_status = self._reap(exit_status)
            now = time.monotonic()
            if exit_status is not None and exited_at is None:
                exited_at = now
                self._kill_group()  # whatever the child left behind
            if exited_at is None:
                self._enforce_deadlines(now)
            elif not open_fds or now - exited_at > DRAIN_SECONDS:
                break
        for fd in list(open_fds):
            os.close(fd)
        outputs.flush("stdout")
        outputs.flush("stderr")
        code = self._conclude(exit_status or 0)
        if self.verdict is None and not self.stops and self.state.get("report") == "html":
            from evaluator.report import report_unfinished  # killed or timed out: its report

            report_unfinished(self.state.get("result_dir"))
        return code

    def _on_message(self, message: dict[str, Any], outputs: _OutputLines, now: float) -> None:
        kind = message["m"]
        if kind == "ready":
            self.ready = True
            if self.stops:
                self._send(self.stops[0])  # a stop that came before the child could take it
        elif kind == "outputs":
            self.state.update(message)
            outputs.log_format = str(message.get("log_format") or "json")
        elif kind == "step":
            self.busy[str(message.get("rule"))] = (message.get("step"), now)
        elif kind == "idle":
            self.busy.pop(str(message.get("rule")), None)
        elif kind == "verdict" and isinstance(message.get("exit_code"), int):
            self.verdict, self.verdict_at = message["exit_code"], now

    def _enforce_deadlines(self, now: float) -> None:
        """Kill the child's group when a rule step overran rule_step_timeout, when a stop's
        grace period is over, or when the child lingers after its verdict."""
        limit = _seconds(self.state.get("step_timeout"), None)
        if limit is not None and self.overrun is None:
            for rule, (step, since) in self.busy.items():
                if now - since > limit:
                    self.overrun = (rule, step, limit)
                    self._kill_group()
                    break
        if self.stop_deadline is not None and now > self.stop_deadline:
            self._kill_group()
        if self.verdict_at is not None and now - self.verdict_at > VERDICT_GRACE:
            self._kill_group()

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
            if pid == self.pid:
                exit_status = status

    def _conclude(self, wait_status: int) -> int:
        """The exit code; when the child gave no verdict, the final status written here."""
        if self.verdict is not None:
            return self.verdict
        from pathlib import Path

        from evaluator.errors import ExitCode
        from evaluator.status.final import close_unfinished

        state = self.state
        result_dir = Path(state["result_dir"]) if state.get("result_dir") else None
        message_dir = Path(state["message_dir"]) if state.get("message_dir") else None
        if self.stops:
            code = ExitCode.stopped_by(self.stops[0])
            close_unfinished(
                result_dir, message_dir, status="Stopped", exit_code=code, text="Stopped"
            )
            return code
        if self.overrun is not None:
            rule, step, limit = self.overrun
            own = (
                f"ClientError: Rule {rule} spent more than {limit:g} s on step {step} "
                f"(rule_step_timeout={limit:g}); the evaluation was ended. Make the rule's "
                "work per step lighter, or raise rule_step_timeout."
            )
            others = (
                f"ClientError: The evaluation was ended because rule {rule} spent more than "
                f"{limit:g} s on step {step} (rule_step_timeout={limit:g})."
            )
            close_unfinished(
                result_dir,
                message_dir,
                status="Error",
                exit_code=ExitCode.CLIENT_ERROR,
                text=own,
                error_type="RuleStepTimeout",
                culprit=rule,
                others_text=others,
            )
            return ExitCode.CLIENT_ERROR
        text = "InternalServerError: " + _death(wait_status)
        close_unfinished(
            result_dir, message_dir, status="Error", exit_code=ExitCode.INTERNAL_ERROR, text=text
        )
        print(text, file=sys.stderr)
        return ExitCode.INTERNAL_ERROR


class _OutputLines:
    """What the child printed outside the log, as ``rule_output`` log lines on our stdout."""

    def __init__(self) -> None:
        self.log_format = "json"
        self.buffers = {"stdout": bytearray(), "stderr": bytearray()}

    def feed(self, stream: str, data: bytes) -> None:
        buffer = self.buffers[stream]
        buffer += data
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                if len(buffer) >= _LINE_LIMIT:
                    self._emit(stream, bytes(buffer))
                    buffer.clear()
                return
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            self._emit(stream, line)

    def flush(self, stream: str) -> None:
        buffer = self.buffers[stream]
        if buffer:
            self._emit(stream, bytes(buffer))
            buffer.clear()

    def _emit(self, stream: str, raw: bytes) -> None:
        import json  # container.link loaded it; kept off the lines before the handlers

        text = raw.decode("utf-8", errors="backslashreplace").rstrip("\r")
        level = "warning" if stream == "stderr" else "info"
        stamp = _timestamp()
        if self.log_format == "console":
            line = f"{stamp} [{level:<9}] rule_output    stream={stream} text={text!r}\n"
        else:
            record = {
                "event": "rule_output",
                "level": level,
                "logger": "evaluator.rule_output",
                "stream": stream,
                "text": text,
                "timestamp": stamp,
            }
            line = json.dumps(record) + "\n"
        _write_all(1, line.encode("utf-8", errors="backslashreplace"))


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # stdout closed (piped into head): the status files still say everything


def _timestamp() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(value: Any, default: float | None) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return default
    return seconds if seconds > 0 else default


def _death(wait_status: int) -> str:
    """How the evaluation process ended, in words, for a run without a verdict."""
    if os.WIFSIGNALED(wait_status):
        signum = os.WTERMSIG(wait_status)
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        hint = " (the container may have run out of memory)" if signum == signal.SIGKILL else ""
        return f"the evaluation process was killed by {name}{hint} before it reported a verdict"
    code = os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else wait_status
    return (
        f"the evaluation process exited with code {code} before it reported a verdict "
        "(rule code calling os._exit(), or a crash of the interpreter)"
    )


def _cannot_start(error: OSError, opt_ml: str) -> int:
    from pathlib import Path

    from evaluator.errors import ExitCode
    from evaluator.status.final import close_unfinished

    text = f"InternalServerError: cannot start the evaluation process: {error}"
    close_unfinished(None, Path(opt_ml) / "output", status="Error", exit_code=3, text=text)
    print(text, file=sys.stderr)
    return ExitCode.INTERNAL_ERROR
