"""Users' regular expressions over tensor names, matched in linear time.

Every pattern a user hands us — ``trial.tensor_names(regex=...)``, a collection's
``include_regex`` from a collections file — goes through ``compile_pattern``. The answer is the
one Python's ``re.search`` (or ``re.match``) gives, as smdebug's; what changes is the cost:

* the pattern is first compiled by Python's ``re`` (so an invalid one fails as it always did),
  and refused when longer than ``max_length`` characters;
* where RE2 means exactly what Python means, RE2 answers, in time linear in the name:
  ``^(a+)+$`` against a long name returns at once instead of backtracking for ever;
* RE2 cannot express backreferences, lookarounds, ``\\Z``, possessive or atomic groups, and
  reads a few spellings differently (``x{,3}``, ``[[:alpha:]]``, ``\\12``, Unicode ``\\w``/``\\d``
  on non-ASCII names). Those patterns and names are matched by Python's ``re`` in a child
  process killed after ``fallback_seconds`` — Python's matcher cannot be interrupted in-process
  — and the answers are remembered, so the names of each new step cost nothing the second time.
  A match that runs out of time raises ``SMDebugValueError`` naming the pattern and the limit.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

from evaluator.errors import SMDebugRuntimeError, SMDebugValueError

__all__ = [
    "DEFAULT_FALLBACK_SECONDS",
    "DEFAULT_MAX_PATTERN_LENGTH",
    "NamePattern",
    "compile_pattern",
    "matching_names",
]

DEFAULT_MAX_PATTERN_LENGTH = 4096
DEFAULT_FALLBACK_SECONDS = 10.0
_MEMO_LIMIT = 100_000  # fallback answers remembered per pattern before the memo starts afresh

_PASSED_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL
# Spellings both engines accept but read differently: "{,n}" (Python: {0,n}; RE2: literal),
# POSIX classes "[:alpha:]" (Python: a plain set), "\12" (Python: group 12; RE2: octal).
_DIFFERENT_READING = re.compile(r"\{,|\[[:.=]|\\[1-9]")

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a rejected pattern goes to the fallback, not to stderr

# The child: Python's own re, one batch of names, the answers as a JSON list of booleans.
_CHILD = (
    "import json,re,sys\n"
    "d=json.load(sys.stdin)\n"
    "c=re.compile(d['pattern'],d['flags'])\n"
    "f=c.match if d['anchored'] else c.search\n"
    "json.dump([f(n) is not None for n in d['names']],sys.stdout)\n"
)


class NamePattern:
    """One compiled user pattern. ``search``/``match`` answer as ``re.search``/``re.match``."""

    __slots__ = ("text", "flags", "what", "engine", "_re2", "_fallback_seconds", "_memo")

    def __init__(self, text: str, flags: int, *, what: str, fallback_seconds: float) -> None:
        compiled = re.compile(text, flags)  # invalid patterns fail here, as they always did
        self.text = text
        self.flags = flags
        self.what = what
        self._fallback_seconds = fallback_seconds
        self._memo: dict[tuple[str, bool], bool] = {}
        self._re2 = _re2_equivalent(text, compiled.flags)
        self.engine = "re2" if self._re2 is not None else "re"

    def __repr__(self) -> str:
        return f"<NamePattern {self.text!r} engine={self.engine}>"

    def search(self, name: str) -> bool:
        return name in self.matching([name])

    def match(self, name: str) -> bool:
        return name in self.matching([name], anchored=True)

    def matching(self, names: Iterable[str], *, anchored: bool = False) -> set[str]:
        """The names the pattern finds (``re.search``; ``re.match`` when ``anchored``)."""
        found: set[str] = set()
        rest: list[str] = []
        fast = self._re2
        test = None if fast is None else (fast.match if anchored else fast.search)
        memo = self._memo
        for name in names:
            if test is not None and _plain(name):
                if test(name) is not None:
                    found.add(name)
                continue
            known = memo.get((name, anchored))
            if known is None:
                rest.append(name)
            elif known:
                found.add(name)
        if rest:
            found.update(n for n, hit in zip(rest, self._fallback(rest, anchored)) if hit)
        return found

    def _fallback(self, names: list[str], anchored: bool) -> list[bool]:
        """Python's answers for ``names``, from a child process given ``fallback_seconds``."""
        unique = list(dict.fromkeys(names))
        request = {"pattern": self.text, "flags": self.flags, "anchored": anchored}
        payload = json.dumps({**request, "names": unique})
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-c", _CHILD],
                input=payload,
                capture_output=True,
                text=True,
                timeout=self._fallback_seconds,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SMDebugValueError(
                f"{self.what}: matching the regular expression {_shown(self.text)} against "
                f"{len(unique)} tensor name(s) took longer than {self._fallback_seconds:g} s "
                "(regex_fallback_timeout). RE2 cannot run this pattern (it uses a lookaround, a "
                "backreference or another construct RE2 lacks), so Python's backtracking matcher "
                "runs it under a time limit: simplify the pattern"
            ) from None
        if done.returncode != 0:
            raise SMDebugRuntimeError(
                f"{self.what}: matching the regular expression {_shown(self.text)} failed in "
                f"its child process (exit {done.returncode}): {done.stderr.strip()[-500:]}"
            )
        answers: list[bool] = json.loads(done.stdout)
        if len(self._memo) + len(unique) > _MEMO_LIMIT:
            self._memo.clear()
        self._memo.update(((n, anchored), hit) for n, hit in zip(unique, answers))
        return [self._memo.get((n, anchored), False) for n in names]


def compile_pattern(
    pattern: str | re.Pattern[str],
    *,
    what: str,
    max_length: int = DEFAULT_MAX_PATTERN_LENGTH,
    fallback_seconds: float = DEFAULT_FALLBACK_SECONDS,
) -> NamePattern:
    """``pattern`` (a string, or a compiled ``re.Pattern`` whose flags are kept) ready to match
    tensor names. ``what`` names where it came from (a parameter, a collection and its file)
    in the errors: ``SMDebugValueError`` when longer than ``max_length`` characters, ``re.error``
    when Python cannot compile it, ``TypeError`` when it is not a string."""
    text: object = pattern
    flags = 0
    if isinstance(pattern, re.Pattern):
        text, flags = pattern.pattern, int(pattern.flags & ~re.UNICODE)
    if not isinstance(text, str):
        raise TypeError(f"{what}: a regular expression must be a string, got {text!r}")
    if len(text) > max_length:
        raise SMDebugValueError(
            f"{what}: the regular expression is {len(text)} characters long, over the limit "
            f"of {max_length} (max_regex_length)"
        )
    return _compiled(text, flags, what, fallback_seconds)


@functools.lru_cache(maxsize=256)
def _compiled(text: str, flags: int, what: str, fallback_seconds: float) -> NamePattern:
    # Cached: a rule asking tensor_names(regex=...) at every step reuses one pattern and its memo.
    return NamePattern(text, flags, what=what, fallback_seconds=fallback_seconds)


def matching_names(
    names: Iterable[str], patterns: Iterable[NamePattern], *, anchored: bool = False
) -> set[str]:
    """The names any of ``patterns`` finds."""
    remaining = set(names)
    found: set[str] = set()
    for pattern in patterns:
        hits = pattern.matching(remaining, anchored=anchored)
        found |= hits
        remaining -= hits
    return found


def _re2_equivalent(text: str, flags: int) -> Any:
    """RE2's compiled form of the pattern when it means what Python's does on plain names,
    else None."""
    if flags & ~(_PASSED_FLAGS | re.UNICODE) or _DIFFERENT_READING.search(text):
        return None
    if flags & re.IGNORECASE and not text.isascii():
        return None  # Unicode case folding: not worth proving the two engines agree
    prefix = "".join(c for f, c in ((re.I, "i"), (re.M, "m"), (re.S, "s")) if flags & f)
    try:
        return re2.compile(f"(?{prefix}){text}" if prefix else text, options=_RE2_OPTIONS)
    except re2.error:
        return None


def _plain(name: str) -> bool:
    """Printable ASCII, where RE2's ASCII ``\\w``, ``\\d``, ``\\s``, ``\\b`` and ``$`` read
    as Python's Unicode ones do (no newline, no vertical tab, no non-ASCII letter)."""
    return name.isascii() and name.isprintable()


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 200 else repr(text[:200]) + "..."
