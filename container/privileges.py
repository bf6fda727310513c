"""Run the evaluation unprivileged, also where it is started as root.

SageMaker starts processing containers as root and creates the folders under ``/opt/ml`` owned
by root. The image sets ``EVALUATOR_RUN_AS=10001:10001`` and starts as root; once the
configuration is read, ``drop_privileges`` makes the folders the run writes (the output folder,
its ``.sagemaker-ignore`` and the message folder) belong to that user, then switches to it
(groups, gid, uid) before any rule code is loaded or any trial is read. Started as another
user (``docker run --user``, Kubernetes ``runAsNonRoot``), without the variable, or as a root
without the capabilities to switch (``--cap-drop ALL``), the process runs as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaluator.errors import ClientError

__all__ = ["ENV_RUN_AS", "drop_privileges"]

ENV_RUN_AS = "EVALUATOR_RUN_AS"
_OUR_FILES = ("rule_evaluation_result.json", ".sagemaker-ignore")
_MESSAGE_FILES = ("message", "failure")


def drop_privileges(config: Any, environ: Mapping[str, str]) -> str | None:
    """Switch to ``EVALUATOR_RUN_AS`` (``uid[:gid]``) when running as root; the ``uid:gid``
    switched to, or None when nothing changed. A folder that cannot be made writable for that
    user is a ClientError naming it."""
    spec = environ.get(ENV_RUN_AS, "").strip()
    if not spec or os.geteuid() != 0:
        return None
    uid, gid = _parse(spec)
    if uid == 0:
        return None
    output = Path(config.output_dir)
    folders = [output, output / ".sagemaker-ignore"]
    owned = [output / name for name in _OUR_FILES]
    message_dir = getattr(config, "message_dir", None)
    if message_dir is not None and Path(message_dir).is_dir():
        folders.append(Path(message_dir))
        owned += [Path(message_dir) / name for name in _MESSAGE_FILES]
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ClientError(f"cannot create the output folder {folder}: {e.strerror or e}") from None
    try:
        for folder in folders:
            os.chown(folder, uid, gid)
        for path in owned:
            if path.exists() and not path.is_symlink():
                os.chown(path, uid, gid)  # an earlier run's file, replaced by rename later
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
    except PermissionError:
        # Root without CAP_CHOWN/CAP_SETUID (--cap-drop ALL): uid 0 holds no privilege
        # beyond what the folders' modes grant, so the run goes on as it is.
        return None
    return f"{uid}:{gid}"


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
