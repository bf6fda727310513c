"""Run the evaluation unprivileged, also where it is started as root.

SageMaker starts processing containers as root and creates the folders under ``/opt/ml`` owned
by root. The image sets ``EVALUATOR_RUN_AS=10001:10001`` and starts as root; once the
configuration is read, ``drop_privileges`` makes the folders the run writes (the output folder
and its ``.sagemaker-ignore``, and an earlier run's files there) belong to that user, then
switches to it (groups, gid, uid) before any rule code is loaded or any trial is read. Nothing
outside the output folder changes owner (the supervisor, still root, writes the message files),
and nothing is followed: a symbolic link an earlier run's rule code planted as
``.sagemaker-ignore`` is replaced by a folder, one planted as a result file is left alone. Started as another
user (``docker run --user``, Kubernetes ``runAsNonRoot``), without the variable, or as a root
without the capabilities to switch (``--cap-drop ALL``), the process runs as it is.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from container.lifetime import rearm
from container.preflight import output_folder_error
from evaluator.errors import ClientError
from evaluator.fileio import open_folder

__all__ = ["ENV_RUN_AS", "drop_privileges", "give_output_folder"]

ENV_RUN_AS = "EVALUATOR_RUN_AS"
_IGNORED = ".sagemaker-ignore"
_OUR_FILES = ("rule_evaluation_result.json", "rule_report_data.json", "rule_report.html")


def drop_privileges(config: Any, environ: Mapping[str, str]) -> str | None:
    """Make the output folder, then switch to ``EVALUATOR_RUN_AS`` (``uid[:gid]``) when running
    as root; the ``uid:gid`` switched to, or None when nothing changed. A folder that cannot be
    made, or made writable for that user, is a ClientError naming it."""
    ids = give_output_folder(Path(config.output_dir), environ)
    if ids is None:
        return None
    uid, gid = ids
    try:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    except PermissionError:  # (as below: no privilege to give up)
        return None
    rearm()  # the kernel forgets the parent-death signal when the user changes
    return f"{uid}:{gid}"


def give_output_folder(output: Path, environ: Mapping[str, str]) -> tuple[int, int] | None:
    """Make the output folder; running as root with ``EVALUATOR_RUN_AS``, give it (with its
    ``.sagemaker-ignore`` and an earlier run's files) to that user: its ``(uid, gid)``, or
    None when nothing was given. The watch gives each run's folder so before the run joins
    a shared worker that runs as that user already."""
    try:  # made here in every case: the supervisor holds it open from now on
        output.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise output_folder_error(output, e) from None
    spec = environ.get(ENV_RUN_AS, "").strip()
    if not spec or os.geteuid() != 0:
        return None
    uid, gid = _parse(spec)
    if uid == 0:
        return None
    try:
        folder = open_folder(output)  # the configured path, as given: nothing planted yet
    except OSError as e:
        raise ClientError(f"cannot open the output folder {output}: {e.strerror or e}") from None
    try:
        ignored = _own_folder(folder, _IGNORED, output)
        try:
            os.fchown(folder, uid, gid)
            os.fchown(ignored, uid, gid)
            for name in _OUR_FILES:
                _chown_file(folder, name, uid, gid)
        finally:
            os.close(ignored)
    except PermissionError:
        # Root without CAP_CHOWN/CAP_SETUID (--cap-drop ALL): uid 0 holds no privilege
        # beyond what the folders' modes grant, so the run goes on as it is.
        return None
    finally:
        os.close(folder)
    return uid, gid


def _own_folder(parent: int, name: str, shown: Path) -> int:
    """The folder ``name`` in ``parent``, made when missing; a symbolic link or a file there
    (planted by an earlier run's rule code) is removed first, never followed."""
    for _ in range(3):
        try:
            return open_folder(name, follow=False, dir_fd=parent)
        except FileNotFoundError:
            pass
        except OSError:  # a symbolic link (ELOOP) or not a folder (ENOTDIR)
            try:
                os.unlink(name, dir_fd=parent)
            except OSError as e:
                raise ClientError(f"cannot replace {shown / name}: {e.strerror or e}") from None
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        except FileExistsError:
            pass
        except OSError as e:
            raise ClientError(f"cannot create {shown / name}: {e.strerror or e}") from None
    raise ClientError(f"{shown / name} keeps changing: cannot make it a folder")


def _chown_file(parent: int, name: str, uid: int, gid: int) -> None:
    """Give an earlier run's file ``name`` in ``parent`` to the user; a symbolic link, FIFO or
    device there is left alone (the run replaces the file by a rename)."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent
        )
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def _parse(spec: str) -> tuple[int, int]:
    uid_text, _, gid_text = spec.partition(":")
    try:
        uid = int(uid_text)
        gid = int(gid_text) if gid_text else uid
    except ValueError:
        raise ClientError(
            f"{ENV_RUN_AS}={spec!r} is not a numeric uid[:gid] such as 10001:10001"
        ) from None
    if uid < 0 or gid < 0:
        raise ClientError(f"{ENV_RUN_AS}={spec!r}: uid and gid cannot be negative")
    return uid, gid
