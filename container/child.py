"""The evaluation process that ``container.supervisor`` starts (never run it by hand).

It handles SIGTERM/SIGINT from its first moment (``container.signals``), tells the supervisor
so, runs the command (``container.cli.run``), sends the verdict, and ends at once with
``os._exit``: a thread that rule code left running cannot keep the process alive.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def main() -> int:
    from container.lifetime import die_with_parent
    from container.link import ENV_FDS, ChildLink
    from container.signals import StopRequested, StopSignals

    signals = StopSignals(raise_in_main=False)  # a stop is handled where the run can say so
    signals.__enter__()
    link = ChildLink.from_environ()
    if link is not None:
        die_with_parent()  # (set before exec already; remembered here for the user switch)
        # Ours alone: processes the rules start inherit neither the variable nor the pipe.
        os.environ.pop(ENV_FDS, None)
        os.set_inheritable(link.control_fd, False)
        link.send("ready")
    try:
        from container.cli import run

        code = run(sys.argv[1:], signals=signals, link=link)
    except StopRequested as stop:
        return _end(128 + stop.signum, None)  # before any status file: the supervisor writes them
    return _end(code, link)


def _end(code: int, link: object) -> int:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    from container.link import ChildLink

    if isinstance(link, ChildLink):
        link.send("verdict", exit_code=code)
        os._exit(code)
    return code
