"""One masking rule for everything that can hold a parameter value: logs, the result file and
the message files SageMaker shows.

* A parameter whose name contains ``pass``, ``secret``, ``token``, ``key``, ``credential`` or
  ``auth`` (any case: ``db_password``, ``passwd``, ``api_key``, ``SessionToken``,
  ``credentials``, ``auth_header``) has its value shown as ``***`` — unless the name's last word
  says it holds data, not a credential (``token_values``, ``token_thresholds_percent``: see
  ``_DATA_WORDS``).
* Any other value, and any free text, has the password of a URL masked:
  ``postgres://u:PW@h`` becomes ``postgres://u:***@h``.
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
    "is_secret_name",
    "mask_endpoint",
    "redact_parameters",
    "redact_value",
    "scrub",
    "secret_values",
]

MASK = "***"
MIN_SCRUBBED_LENGTH = 4  # shorter values would mask ordinary words and numbers in free text
_SECRET_WORDS = ("pass", "secret", "token", "key", "credential", "auth")
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


def redact_value(value: str) -> str:
    """``value`` with the password of every URL in it masked."""
    return _URL_PASSWORD.sub(rf"\1{MASK}", value)


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
