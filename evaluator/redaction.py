"""One masking rule for everything that can hold a parameter value: logs, the result file and
the message files SageMaker shows.

* A parameter whose name contains ``pass``, ``secret``, ``token``, ``key``, ``credential`` or
  ``auth`` (any case: ``db_password``, ``passwd``, ``api_key``, ``SessionToken``,
  ``credentials``, ``auth_header``) has its value shown as ``***`` — unless the name's last word
  says it holds data, not a credential (``token_values``, ``token_thresholds_percent``: see
  ``_DATA_WORDS``).
* Any other value, and any free text, has the secrets of a URL masked: the password
  (``postgres://u:PW@h`` becomes ``postgres://u:***@h``), secret-named and signature query
  parameters (``?token=***``, ``X-Amz-Signature=***``), and in http(s) URLs path segments that
  look generated (``https://hooks.slack.com/services/T0/B0/***``).
* ``scrub`` also replaces, in free text such as an exception message, the secret values of
  given parameters (those of at least ``MIN_SCRUBBED_LENGTH`` characters).
* ``mask_endpoint`` shows an action's e-mail address or phone number as ``a***@example.com`` /
  ``+1***89``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = [
    "MASK",
    "MIN_SCRUBBED_LENGTH",
    "escape_controls",
    "escape_html",
    "url_origin",
    "is_secret_name",
    "mask_endpoint",
    "redact_parameters",
    "redact_value",
    "scrub",
    "secret_values",
]

MASK = "***"
MIN_SCRUBBED_LENGTH = 4  # shorter values would mask ordinary words and numbers in free text
_SECRET_WORDS = ("pass", "secret", "token", "key", "credential", "auth", "webhook", "signature")
# A name ending in one of these words holds data about tokens or keys, not a credential.
_DATA_WORDS = frozenset(
    {"values", "percent", "count", "counts", "ids", "length", "len", "size", "regex", "names"}
)
_WORD_SPLIT = re.compile(r"[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])")
# scheme://user:PASSWORD@host — the password runs to the last '@' before the path.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s/@:]*:)[^\s/]+(?=@)")


def is_secret_name(name: str) -> bool:
    """Whether a parameter named ``name`` holds a secret (see the module docstring)."""
    lowered = name.lower()
    if not any(word in lowered for word in _SECRET_WORDS):
        return False
    words = [w.lower() for w in _WORD_SPLIT.split(name) if w]
    return not (len(words) > 1 and words[-1] in _DATA_WORDS)


# A query parameter holding a credential: secret-named, or a signature (presigned URLs).
_QUERY_PARAM = re.compile(r"(?i)([?&;])([a-z0-9_.\-]+)=([^&;#\s\"'<>]*)")
_QUERY_SECRETS = frozenset({"sig", "signature", "code", "sas", "sv", "se", "sp", "x-amz-date"})
_HTTP_URL = re.compile(r"(?i)\bhttps?://[^\s\"'<>]+")
# A path segment of an http(s) URL that looks like a generated secret (webhook URLs).
_PATH_SECRET = re.compile(
    r"(?<=/)(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{24,}"
)


def redact_value(value: str) -> str:
    """``value`` with the secrets of every URL in it masked: the password, secret-named query
    parameters (``?token=``, ``X-Amz-Signature=``), and in http(s) URLs path segments that look
    generated (24 or more letters and digits, as in webhook URLs)."""
    value = _URL_PASSWORD.sub(rf"\1{MASK}", value)
    if "://" not in value:
        return value
    return _HTTP_URL.sub(_redact_http, _QUERY_PARAM.sub(_redact_query, value))


def _redact_query(match: re.Match[str]) -> str:
    sep, name, val = match.group(1), match.group(2), match.group(3)
    return f"{sep}{name}={MASK}" if _secret_query(name) and val else match.group(0)


def _secret_query(name: str) -> bool:
    return is_secret_name(name) or name.lower() in _QUERY_SECRETS or "amz-" in name.lower()


def _redact_http(match: re.Match[str]) -> str:
    url = match.group(0)
    head, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    if not slash:
        return url
    return f"{head}{sep}{host}/{_PATH_SECRET.sub(MASK, path)}"


def redact_parameters(parameters: Mapping[str, str]) -> dict[str, str]:
    """A copy for logs and result files: secret-named values masked, URL passwords masked in
    the others (a value that is not a string, such as None, is kept as it is)."""
    return {
        k: MASK if is_secret_name(k) else redact_value(v) if isinstance(v, str) else v
        for k, v in parameters.items()
    }


def secret_values(parameters: Mapping[str, object]) -> frozenset[str]:
    """The values of ``parameters`` that ``scrub`` must hide in free text: the string values of
    secret-named parameters, and URL passwords in the others."""
    found: set[str] = set()
    for k, v in parameters.items():
        if not isinstance(v, str):
            continue
        if is_secret_name(k):
            found.add(v)
        for match in _URL_PASSWORD.finditer(v):
            found.add(v[match.end(1) : match.end()])
        for match in _QUERY_PARAM.finditer(v):
            if "://" in v and _secret_query(match.group(2)):
                found.add(match.group(3))
        for url in _HTTP_URL.finditer(v):
            found.update(_PATH_SECRET.findall(url.group(0).partition("://")[2].partition("/")[2]))
    return frozenset(s for s in found if len(s) >= MIN_SCRUBBED_LENGTH)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with URL passwords and every one of ``secrets`` (also as ``repr`` shows it)
    masked."""
    forms = {form for s in secrets for form in (s, repr(s)[1:-1]) if form}
    for form in sorted(forms, key=len, reverse=True):  # longest first: no partial leftovers
        text = text.replace(form, MASK)
    return redact_value(text)


def mask_endpoint(endpoint: object) -> str:
    """An action's e-mail address or phone number as logs show it: its first character(s), the
    mask and the e-mail domain or the last two digits."""
    text = str(endpoint)
    local, at, domain = text.rpartition("@")
    if at:
        return f"{local[:1]}{MASK}@{domain}"
    return f"{text[:2]}{MASK}{text[-2:]}" if len(text) >= 6 else MASK


# C0 and C1 control characters but newline and tab: ANSI escapes, carriage returns, bells.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ALL_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def escape_controls(text: str, *, line_breaks: bool = False) -> str:
    """``text`` with control characters (but newline and tab, unless ``line_breaks``) shown as
    ``\\xNN``: for a terminal, where a tensor or rule name must not move the cursor or retitle
    the window (nor, with ``line_breaks``, start a line of its own in a one-line field)."""
    pattern = _ALL_CONTROLS if line_breaks else _CONTROLS
    return pattern.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def escape_html(value: object) -> str:
    """``value`` as HTML text or attribute: ``<>&"'`` escaped, and control characters (ESC,
    BEL, NUL...; not newline or tab) shown as ``\\xNN`` so no raw one reaches a page."""
    from html import escape

    return escape(escape_controls(str(value)), quote=True)


def url_origin(url: str) -> str:
    """What may be said of a URL whose path or query may be its key (a chat webhook): its
    scheme and host, or its length when it has none."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        scheme, host = parts.scheme, parts.hostname
    except ValueError:  # (an unbalanced [ in the host, say)
        scheme, host = "", None
    if scheme and host:
        return f"{scheme}://{host}"
    return f"a text of {len(url)} characters"
