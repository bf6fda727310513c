"""The evaluation process and everything it starts cannot signal the supervisor or its
ancestors (seccomp).

Where the run has no second user (started as a non-root user, ``--user``, runAsNonRoot, the
plain command), rule code runs with the supervisor's uid and could otherwise end the
supervisor, or the process that started it (``timeout``, ``rule-evaluator batch``), with a
signal (143, 137) or stop it. Between ``fork`` and ``exec`` the child sets
``PR_SET_NO_NEW_PRIVS`` and a seccomp filter, inherited by every process it starts, that fails
with ``EPERM``:

* ``kill``, ``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo`` and ``pidfd_open`` aimed
  at the supervisor's pid, at its process group (``-pgid``), at every process (``-1``), or at
  any of the supervisor's ancestors up to init or at their process groups;
* ``fcntl`` ``F_SETOWN``, ``F_SETOWN_EX`` and ``F_SETSIG``, and ``ioctl`` ``FIOSETOWN`` and
  ``SIOCSPGRP``: with them the kernel itself would signal a process named by rule code when a
  descriptor becomes ready (signal-driven I/O); ``ioctl`` ``TIOCSTI``, which would type a
  ``^C`` into a terminal the run shares (SIGINT to its foreground group);
* ``tkill`` (obsolete: its thread ids are not the pids the checks above know), ``ptrace``,
  ``process_vm_writev`` and ``pidfd_send_signal`` (no rule needs them; a pidfd can come from
  opening ``/proc/PID``; the first two would reach the supervisor's memory where the kernel's
  Yama setting allows it);
* any system call through another ABI (x32, i386 on x86-64), which the filter cannot check.

Linux on x86-64 and arm64; elsewhere ``filter_program`` returns None and the supervisor's
check of the sender (``sigtimedwait``) is the only guard.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from collections.abc import Sequence

__all__ = ["confine", "filter_program"]

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO

# arch, its AUDIT_ARCH value, and the numbers of: signal senders, always-denied calls,
# fcntl, ioctl
_ARCHES = {
    "x86_64": (0xC000003E, (62, 234, 129, 297, 434), (200, 101, 311, 424), 72, 16),
    "aarch64": (0xC00000B7, (129, 131, 138, 240, 434), (130, 117, 271, 424), 25, 29),
}
_FCNTL_OWNER = (8, 10, 15)  # F_SETOWN, F_SETSIG, F_SETOWN_EX
# FIOSETOWN, SIOCSPGRP; TIOCSTI (typing ^C into a shared terminal signals its foreground group)
_IOCTL_REFUSED = (0x8901, 0x8902, 0x5412)
_MAX_TARGETS = 120  # a conditional jump reaches 255 instructions at most
_X32_BIT = 0x40000000

# classic BPF opcodes
_LD_W_ABS = 0x20
_JA = 0x05
_JEQ_K = 0x15
_JSET_K = 0x45
_RET_K = 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def filter_program(
    supervisor: int, group: int, ancestors: Sequence[tuple[int, int]] = ()
) -> bytes | None:
    """The BPF program, or None on a machine it does not know. ``ancestors``: the
    supervisor's parent, grandparent, ... as (pid, process group)."""
    machine = platform.machine()
    if machine not in _ARCHES:
        return None
    arch, senders, denied, fcntl, ioctl = _ARCHES[machine]
    code = [
        _insn(_LD_W_ABS, 0, 0, 4),  # arch
        _insn(_JEQ_K, 1, 0, arch),
        _insn(_RET_K, 0, 0, _DENY),
        _insn(_LD_W_ABS, 0, 0, 0),  # syscall number
    ]
    if machine == "x86_64":
        code += [_insn(_JSET_K, 0, 1, _X32_BIT), _insn(_RET_K, 0, 0, _DENY)]
    for number in denied:
        code += [_insn(_JEQ_K, 0, 1, number), _insn(_RET_K, 0, 0, _DENY)]
    code += _argument_check(fcntl, 24, _FCNTL_OWNER)  # the command: the second argument
    code += _argument_check(ioctl, 24, _IOCTL_REFUSED)
    targets = [supervisor, -group, -1]
    for pid, pgid in ancestors:
        targets += [pid] if pid > 0 else []
        targets += [-pgid] if pgid > 0 else []  # (init's may read 0: kill(0) is our own)
    targets = list(dict.fromkeys(targets))[:_MAX_TARGETS]
    # jump to the pid check when the call is a sender; else allow
    checks = len(senders)
    for i, number in enumerate(senders):
        code.append(_insn(_JEQ_K, checks - i, 0, number))
    code.append(_insn(_RET_K, 0, 0, _ALLOW))
    code.append(_insn(_LD_W_ABS, 0, 0, 16))  # the low 32 bits of the first argument (a pid)
    for i, target in enumerate(targets):
        code.append(_insn(_JEQ_K, len(targets) - i, 0, target))
    code.append(_insn(_RET_K, 0, 0, _ALLOW))
    code.append(_insn(_RET_K, 0, 0, _DENY))
    return b"".join(code)


def _argument_check(number: int, offset: int, refused: Sequence[int]) -> list[bytes]:
    """Deny system call ``number`` when the low 32 bits of the argument at ``offset`` are one
    of ``refused``; leaves the system call number loaded for what follows."""
    code = [_insn(_JEQ_K, 0, len(refused) + 2, number), _insn(_LD_W_ABS, 0, 0, offset)]
    for i, value in enumerate(refused):
        code.append(_insn(_JEQ_K, len(refused) - i + 1, 0, value))  # to the denial
    code.append(_insn(_LD_W_ABS, 0, 0, 0))  # not refused: reload the number, go on
    skip = [_insn(_JA, 0, 0, 1), _insn(_RET_K, 0, 0, _DENY)]
    return code + skip


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def confine(program: bytes | None) -> bool:
    """Install ``program`` in this process (between fork and exec); whether it took hold."""
    if program is None:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0) != 0:
        return False
    return bool(
        libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), 0, 0)
        == 0
    )
