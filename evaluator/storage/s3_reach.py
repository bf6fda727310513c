"""Why an S3 endpoint that never answered could not be reached, in words a user can act on,
and the hint for the commonest mistake: a loopback endpoint (``http://127.0.0.1:5000``, the
moto or MinIO of the docs) given to a process inside a container, where 127.0.0.1 is the
container itself."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from botocore.exceptions import ClientError

from evaluator.errors import StorageError

if TYPE_CHECKING:
    from evaluator.storage.s3_outage import Unanswered

__all__ = [
    "FIRST_CONTACT_DEADLINE",
    "READ_TIMEOUT",
    "container_markers",
    "loopback_hint",
    "unreachable_error",
    "unreachable_reason",
]

# Before an endpoint has answered once, a request gives up after this many seconds: an
# endpoint that never answered is wrong or unreachable, and saying so soon is worth more than
# retrying for the full request deadline.
FIRST_CONTACT_DEADLINE = 3.0

# docs/s3.md's read_timeout: the longest wait for a byte of an answer (reads and uploads).
READ_TIMEOUT = 20.0

# Files that exist inside a Docker (/.dockerenv) or Podman (/run/.containerenv) container.
container_markers: tuple[str, ...] = ("/.dockerenv", "/run/.containerenv")
_CGROUP_WORDS = ("docker", "kubepods", "containerd", "libpod")


def unreachable_reason(error: BaseException) -> str:
    """What went wrong in a failed connection, from botocore's error and its cause."""
    cause = getattr(error, "kwargs", {}).get("error") if hasattr(error, "kwargs") else None
    text = f"{type(error).__name__}: {error} {cause or ''}"
    if "Errno 111" in text or "Connection refused" in text or "ConnectionRefused" in text:
        return "connection refused: nothing listens at that address and port"
    if any(w in text for w in ("Name or service not known", "nodename nor servname", "gaierror")):
        return "the host name does not resolve"
    if "Temporary failure in name resolution" in text or "No address associated" in text:
        return "the host name does not resolve"
    if "ConnectTimeout" in text:
        return "no connection within the connect timeout (a wrong address, or a firewall)"
    if "ReadTimeout" in text:
        return "it accepted the connection but sent no answer in time"
    return str(cause or error)


def unreachable_error(
    error: StorageError,
    failure: Unanswered,
    endpoint: str,
    target: str,
    *,
    connect_timeout: float,
    read_timeout: float,
    max_attempts: int,
    deadline: float,
) -> StorageError:
    """``error`` (the translated last failure) told as a request that used up its budget
    against an endpoint that never answered: what was tried, for how long, and where."""
    first = min(deadline, FIRST_CONTACT_DEADLINE)
    if not isinstance(failure.error, ClientError):  # no answer at all: say where and why
        error = type(error)(
            f"cannot reach S3 at {endpoint} ({unreachable_reason(failure.error)}) reading "
            f"{target}{loopback_hint(endpoint)}",
            uri=target,
        )
    first_text = f", {first:g} s until the endpoint first answers" if first < deadline else ""
    budget = (
        f"gave up after {failure.attempts} attempt{'s' if failure.attempts != 1 else ''} "
        f"in {failure.seconds:.1f} s at {endpoint} (each attempt: connect timeout "
        f"{connect_timeout:g} s, read timeout {read_timeout:g} s; at most "
        f"{max_attempts} attempts within {deadline:g} s per request{first_text})"
        ". The endpoint comes from AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3 when set, else "
        "from AWS_REGION"
    )
    answered = isinstance(failure.error, ClientError)  # 5xx or throttling: it is there
    return type(error)(f"{error}; {budget}", uri=target, unreachable=not answered)


def loopback_hint(endpoint: str) -> str:
    """For a loopback endpoint inside a container: where the user's server really is."""
    host = urlsplit(endpoint).hostname or ""
    if not (host == "localhost" or host == "::1" or host.startswith("127.")):
        return ""
    if not _in_container():
        return ""
    port = urlsplit(endpoint).port
    there = f"http://host.docker.internal:{port}" if port else "http://host.docker.internal"
    return (
        f". Inside a container {host} is the container itself, not the machine running it: "
        f"run the container with --network host, or set AWS_ENDPOINT_URL={there} "
        "(on Linux, with --add-host=host.docker.internal:host-gateway)"
    )


def _in_container() -> bool:
    if any(os.path.exists(marker) for marker in container_markers):
        return True
    try:
        with open("/proc/1/cgroup", encoding="utf-8", errors="replace") as f:
            cgroups = f.read()
    except OSError:
        return False
    return any(word in cgroups for word in _CGROUP_WORDS)
