"""Every process of a run ends with it (``container.lifetime``): the kill of what is left below
the supervisor, against a process that keeps changing its pid, and the PID namespace."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from container.lifetime import (
    ancestors,
    become_subreaper,
    child_in_new_pid_namespace,
    kill_descendants,
    none_left,
)

# Forks, lets its parent exit, and starts a session of its own, again and again; writes its
# pid to a file every 50 ms while it lives.
HOPPER = textwrap.dedent("""
    import os, sys, time
    start = last = time.monotonic()
    while time.monotonic() - start < 20:
        if os.fork():
            os._exit(0)
        os.setsid()
        if time.monotonic() - last > 0.05:
            last = time.monotonic()
            with open(sys.argv[1], "w") as f:
                f.write(str(os.getpid()))
""")

_SUBREAPER_KILL = textwrap.dedent("""
    import os, subprocess, sys, time
    from container.lifetime import become_subreaper, kill_descendants, none_left
    become_subreaper()
    for _ in range(2):
        subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.01)
    time.sleep(0.3)
    kill_descendants()
    print(none_left())
""")


@pytest.mark.parametrize("attempt", range(3))
def test_a_pid_hopping_process_is_killed(tmp_path: Path, attempt: int) -> None:
    """Two processes that fork and exit without pause (each in a new session) are all dead
    when kill_descendants returns: waitpid says no child is left, and the pid file stops."""
    beat = tmp_path / "beat"
    done = subprocess.run(
        [sys.executable, "-c", _SUBREAPER_KILL, HOPPER, str(beat)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.stdout.strip() == "True", done
    stamp = beat.stat().st_mtime_ns
    time.sleep(0.5)
    assert beat.stat().st_mtime_ns == stamp, "a hopping process outlived kill_descendants"


def test_none_left_reaps_and_answers() -> None:
    """A child still running: False; once it ended and was reaped: True."""
    become_subreaper()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    assert none_left() is False
    child.wait()
    assert none_left() is True
    assert kill_descendants() == []


def test_ancestors_lead_to_init() -> None:
    """The parent first, init last, each with its process group."""
    found = ancestors()
    assert found[0][0] == os.getppid()
    assert found[-1][0] == 1 or len(found) == 32


@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace needs root (CAP_SYS_ADMIN)")
def test_the_child_is_pid_1_of_a_namespace_and_threads_work_after() -> None:
    """Inside the block the child is pid 1 of a new namespace; after it, this process starts
    threads (refused by the kernel while the namespaces differ) and children of its own
    namespace again."""
    with child_in_new_pid_namespace() as made:
        inner = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True)
    if not made:
        pytest.skip("no PID namespace here")
    assert inner.stdout.strip() == "1"
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(True))
    thread.start()
    thread.join()
    outer = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True)
    assert seen == [True] and outer.stdout.strip() != "1"


def test_the_namespace_can_be_switched_off() -> None:
    """EVALUATOR_PID_NAMESPACE=off: no namespace, whoever runs it."""
    with child_in_new_pid_namespace({"EVALUATOR_PID_NAMESPACE": "off"}) as made:
        assert made is False


@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace needs root (CAP_SYS_ADMIN)")
def test_inside_a_namespace_without_its_own_proc_nothing_is_found() -> None:
    """In a PID namespace whose /proc is not mounted, /proc's pids name other processes: the
    tree walks find nothing (never the wrong processes to kill) and only the parent is an
    ancestor (none here: it is outside)."""
    probe = (
        "import subprocess, time, sys\n"
        "from container.lifetime import ancestors, descendants, _children\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(5)'])\n"
        "time.sleep(0.2)\n"
        "print(descendants(), _children(), ancestors())\n"
        "child.kill()\n"
    )
    with child_in_new_pid_namespace() as made:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[3],
        )
    if not made:
        pytest.skip("no PID namespace here")
    assert done.stdout.strip() == "[] [] []", done
