"""What one S3 request came back with: a ``Reply`` (S3's answer, success or error), or, when no
answer came, botocore's connection exception; ``reply_or_raise`` reads obstore's failures into
one or the other.

obstore says by its exception's type what it can: a 404 is ``FileNotFoundError``, a 403
``PermissionDeniedError``, a 401 ``UnauthenticatedError`` (304 and 412 have theirs too), and a
listed key its paths cannot hold is ``InvalidPathError``. It has no type for anything else: every
failed listing, the other statuses (416, 5xx, a redirect without ``Location``) and every request
that got no answer (refused, timed out, cut off) are ``GenericError``, told apart here by its
text. S3's own error code, message and region are in the answer's XML body, which obstore gives
only inside its message, so they are read from the text whatever the type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import NoReturn

from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from evaluator.storage.base import ObjectInfo

__all__ = ["Reply", "UnreadableKey", "first_line", "reply_or_raise"]

_STATUS = re.compile(r"status code: (\d{3})")
_CODE = re.compile(r"<Code>([^<]*)</Code>")
_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")
_REGION = re.compile(r"<Region>([^<]*)</Region>")
_REASON = re.compile(r'(?:message|error): "([^"]*)"')
_PATH = re.compile(r'[Pp]ath "([^"]*)"')


class UnreadableKey(Exception):
    """A listing holds a key that obstore cannot address (an empty, ``.`` or ``..`` segment,
    as in ``a//b``): neither smdebug nor TensorBoard writes such keys."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: ``body`` for a success; ``code`` and ``message`` (S3's error) otherwise.
    ``region`` is the bucket's region when an error answer named it."""

    status: int
    body: bytes = b""
    code: str = ""
    message: str = ""
    region: str | None = None
    listing: tuple[ObjectInfo, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status < 300


@cache
def _typed_statuses() -> tuple[tuple[type[Exception], int], ...]:
    """obstore's exception types that stand for one HTTP status (imported on first failure)."""
    from obstore.exceptions import (
        NotModifiedError,
        PermissionDeniedError,
        PreconditionError,
        UnauthenticatedError,
    )

    return (
        (FileNotFoundError, 404),  # obstore raises the built-in for its NotFound
        (PermissionDeniedError, 403),
        (UnauthenticatedError, 401),
        (NotModifiedError, 304),
        (PreconditionError, 412),
    )


def reply_or_raise(error: Exception, endpoint: str) -> Reply:
    """An obstore exception as S3's error answer; raises ``UnreadableKey`` for a listed key
    obstore cannot address, and botocore's connection exception when no answer came."""
    from obstore.exceptions import InvalidPathError

    text = str(error)
    if isinstance(error, InvalidPathError):
        name = _PATH.search(text)
        raise UnreadableKey(name.group(1) if name else "?")
    status = next((s for kind, s in _typed_statuses() if isinstance(error, kind)), None)
    if status is None and (found := _STATUS.search(text)):  # GenericError: no type to go by
        status = int(found.group(1))
    if status is not None:
        return _error_answer(status, text)
    if "BareRedirect" in text:  # a 301/307 without Location: the bucket is in another region
        return Reply(301, code="PermanentRedirect", message="the bucket is in another region")
    _raise_unanswered(error, text, endpoint)


def _error_answer(status: int, text: str) -> Reply:
    """S3's code, message and region from the body quoted in ``text`` (a HEAD has no body:
    its status is its code)."""
    code, message, region = (p.search(text) for p in (_CODE, _MESSAGE, _REGION))
    return Reply(
        status,
        code=code.group(1) if code else str(status),
        message=message.group(1) if message else "",
        region=region.group(1) if region else None,
    )


def _raise_unanswered(error: Exception, text: str, endpoint: str) -> NoReturn:
    """Raise botocore's exception for a request that got no answer, by what obstore's text says
    happened (only the reason obstore quotes: never a header, so never a credential)."""
    reason = _REASON.search(text)
    cause = reason.group(1) if reason else first_line(error)
    if "kind: Connect" in text:
        if "TimedOut" in text or "timed out" in text:
            raise ConnectTimeoutError(endpoint_url=endpoint)
        raise EndpointConnectionError(endpoint_url=endpoint, error=cause)
    if "kind: Timeout" in text or "TimedOut" in text:
        raise ReadTimeoutError(endpoint_url=endpoint, error=cause)
    raise ConnectionClosedError(endpoint_url=endpoint)


def first_line(error: BaseException) -> str:
    """``Type: the first line of its message``."""
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
