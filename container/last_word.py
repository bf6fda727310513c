"""The supervisor's last word on a run (``container.supervisor``): which outcome stands, and
the final status it says when the evaluation's cannot be taken: a ``RunClosed`` event told to
the run's sinks (``container.compose.final_sinks``: the message files, the result file closed
by ``evaluator.status.final``, the report saying why, and any registered output).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluator.sinks.events import Sinks

__all__ = ["SURVIVORS", "cannot_start", "conclude", "death"]

SURVIVORS = (
    "a process the evaluation started could not be ended (it kept escaping for 5 s); its "
    "verdict is not taken. Run it where the evaluation can have a PID namespace of its own "
    "(root with CAP_SYS_ADMIN), or find what in the rule code starts processes."
)


def conclude(
    *,
    stops: list[int],
    overrun: tuple[str, Any, float] | None,
    untrusted: bool,
    verdict: int | None,
    said_done: bool,
    result_fd: int | None,
    message_fd: int | None,
    wait_status: int,
    sinks: Sinks | None = None,
    result_dir: str | None = None,
    survivors: bool = False,
    why: str | None = None,
) -> int:
    """The exit code, with the final status said here, through ``sinks`` (by default the
    message and result files in the held folders, and the registered outputs), when the
    child's cannot be taken (see ``container.supervisor``). ``why``: how the evaluation
    ended, when ``wait_status`` does not say it (a shared worker's death, told by the
    watch)."""
    from evaluator.errors import ExitCode
    from evaluator.sinks.events import RunClosed
    from evaluator.status.final import confirm

    if sinks is None:
        from container.compose import final_sinks

        sinks = final_sinks({}, result_fd, message_fd)

    def close(status: str, exit_code: int, text: str, **fields: Any) -> None:
        event = RunClosed(status, exit_code, text, result_dir=result_dir, **fields)
        sinks.emit("run_closed", event)
        sinks.wait()  # what a sink started (a webhook's post) before this process ends

    if stops:
        code = ExitCode.stopped_by(stops[0])
        close("Stopped", code, "Stopped", force=untrusted, stopped=True)
        return code
    if overrun is not None:
        rule, step, limit = overrun
        own = (
            f"ClientError: Rule {rule} spent more than {limit:g} s on step {step} "
            f"(rule_step_timeout={limit:g}); the evaluation was ended. Make the rule's "
            "work per step lighter, or raise rule_step_timeout."
        )
        others = (
            f"ClientError: The evaluation was ended because rule {rule} spent more than "
            f"{limit:g} s on step {step} (rule_step_timeout={limit:g})."
        )
        close(
            "Error",
            ExitCode.CLIENT_ERROR,
            own,
            error_type="RuleStepTimeout",
            culprit=rule,
            others_text=others,
            force=True,
        )
        return ExitCode.CLIENT_ERROR
    if not untrusted and verdict is not None:
        return verdict  # no rule code ran: the child's own word
    why = death(wait_status) if why is None else why
    if survivors:  # what such a process writes would count: take nothing of the run's
        text = f"InternalServerError: {SURVIVORS}"
        close("Error", ExitCode.INTERNAL_ERROR, text, force=True)
        print(text, file=sys.stderr)
        return ExitCode.INTERNAL_ERROR
    if untrusted:
        confirmed, problem = confirm(result_fd, message_fd)
        if confirmed is not None:
            return confirmed
        if said_done:  # it said it was done, but its file says not
            why = f"the evaluation ended, but {problem}"
    text = "InternalServerError: " + why
    close("Error", ExitCode.INTERNAL_ERROR, text, force=untrusted)
    print(text, file=sys.stderr)
    return ExitCode.INTERNAL_ERROR


def death(wait_status: int) -> str:
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


def cannot_start(error: OSError, message_fd: int | None) -> int:
    from evaluator.errors import ExitCode
    from evaluator.status.final import close_unfinished

    text = f"InternalServerError: cannot start the evaluation process: {error}"
    close_unfinished(None, message_fd, status="Error", exit_code=3, text=text)
    print(text, file=sys.stderr)
    return ExitCode.INTERNAL_ERROR
