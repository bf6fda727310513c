"""The seccomp filter of the evaluation process (``container.confine``): what it refuses, in a
forked process that installs it, and what it still lets through."""

from __future__ import annotations

import errno
import fcntl
import os
import platform
import signal
import struct
from collections.abc import Callable

import pytest

from container.confine import confine, filter_program
from container.lifetime import ancestors

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"),
    reason="the filter knows Linux on x86-64 and arm64",
)


def _in_confined_child(calls: dict[str, Callable[[int], object]]) -> dict[str, str]:
    """Fork; the child installs the filter made for this process (the supervisor) and runs
    each call with a pipe's read end; 'ok' or the errno name of each."""
    program = filter_program(os.getpid(), os.getpgrp(), ancestors())
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's report comes through the pipe
        os.close(r)
        answers = []
        if not confine(program):
            os._exit(9)
        probe_r, _ = os.pipe()
        for name, call in calls.items():
            try:
                call(probe_r)
                answers.append(f"{name}=ok")
            except OSError as e:
                answers.append(f"{name}={errno.errorcode.get(e.errno or 0, e.errno)}")
        os.write(w, "\n".join(answers).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return dict(line.split("=", 1) for line in text.splitlines())


def test_descriptors_cannot_be_armed_to_signal_another_process() -> None:
    """F_SETOWN, F_SETOWN_EX, F_SETSIG, FIOSETOWN and SIOCSPGRP are refused (the kernel would
    send the signal), and TIOCSTI (a typed ^C); the other fcntl and ioctl commands work."""
    me = os.getpid()
    answers = _in_confined_child(
        {
            "F_SETOWN": lambda fd: fcntl.fcntl(fd, fcntl.F_SETOWN, me),
            "F_SETOWN_EX": lambda fd: fcntl.fcntl(fd, 15, struct.pack("ii", 1, me)),
            "F_SETSIG": lambda fd: fcntl.fcntl(fd, 10, signal.SIGTERM),
            "FIOSETOWN": lambda fd: fcntl.ioctl(fd, 0x8901, struct.pack("i", me)),
            "SIOCSPGRP": lambda fd: fcntl.ioctl(fd, 0x8902, struct.pack("i", me)),
            "TIOCSTI": lambda fd: fcntl.ioctl(fd, 0x5412, b"\x03"),
            "F_GETFL": lambda fd: fcntl.fcntl(fd, fcntl.F_GETFL),
            "F_SETFL": lambda fd: fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK),
            "FIONREAD": lambda fd: fcntl.ioctl(fd, 0x541B, struct.pack("i", 0)),
            "dup": os.dup,
        }
    )
    assert answers == {
        "F_SETOWN": "EPERM",
        "F_SETOWN_EX": "EPERM",
        "F_SETSIG": "EPERM",
        "FIOSETOWN": "EPERM",
        "SIOCSPGRP": "EPERM",
        "TIOCSTI": "EPERM",
        "F_GETFL": "ok",
        "F_SETFL": "ok",
        "FIONREAD": "ok",
        "dup": "ok",
    }


def test_the_supervisor_and_its_ancestors_cannot_be_signalled() -> None:
    """kill (signal 0: only the permission check) of the supervisor, its parent and
    grandparent, their groups and every process is refused; of the child itself, allowed."""
    me, up = os.getpid(), ancestors()
    assert len(up) >= 2, up
    answers = _in_confined_child(
        {
            "supervisor": lambda _: os.kill(me, 0),
            "supervisor group": lambda _: os.kill(-os.getpgid(me), 0),
            "parent": lambda _: os.kill(up[0][0], 0),
            "grandparent": lambda _: os.kill(up[1][0], 0),
            "grandparent group": lambda _: os.kill(-up[1][1], 0),
            "everyone": lambda _: os.kill(-1, 0),
            "itself": lambda _: os.kill(os.getpid(), 0),
        }
    )
    refused = {k for k, v in answers.items() if v == "EPERM"}
    assert refused == {
        "supervisor",
        "supervisor group",
        "parent",
        "grandparent",
        "grandparent group",
        "everyone",
    }, answers


def test_the_program_fits_its_jumps() -> None:
    """Two hundred ancestors still give a program whose jumps reach (a conditional jump
    spans 255 instructions at most: the list of targets is capped)."""
    program = filter_program(100, 100, [(1000 + i, 2000 + i) for i in range(200)])
    assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 400
