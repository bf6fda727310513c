""" "Did you mean" for the command line: a misspelt command or evaluator flag named with its
likely intent, and argparse parsers (the subcommands) that do the same for their own options.

A run's flags are open-ended (any unknown ``--key`` is a rule parameter), so a misspelt
``--trail-dir`` is not an error by itself; it becomes one only when the run then lacks what the
flag would have given (no trial, no rule). ``flag_hints`` is added to that error.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

__all__ = ["COMMANDS", "SuggestingParser", "close_to", "flag_hints", "usage"]

COMMANDS = ("rules", "summary", "report", "upload", "batch", "watch", "help")
PROG = "rule-evaluator"


def close_to(word: str, candidates: Iterable[str], *, cutoff: float = 0.75) -> list[str]:
    """The candidates ``word`` most likely misspells, best first (at most two)."""
    return difflib.get_close_matches(word, list(candidates), n=2, cutoff=cutoff)


def _known_flags() -> dict[str, str]:
    """Every spelling of every evaluator flag, normalized (lower case, '-'), to its display."""
    from container.help import flag_names
    from evaluator.config.keys import KNOWN_KEYS

    out: dict[str, str] = {}
    for key in sorted(KNOWN_KEYS):
        names = flag_names(key)
        for name in names:
            out[name.lower().replace("_", "-")] = names[0] if name.lower() != name else name
    return out


def flag_hints(argv: Sequence[str]) -> str:
    """ " Did you mean --trial-dir (for --trail-dir)?" for each token of ``argv`` that misspells a
    command or an evaluator flag; "" when none does."""
    known = _known_flags()
    hints: list[str] = []
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        for command in close_to(argv[0].lower(), COMMANDS)[:1]:
            hints.append(f"'{PROG} {command}' (for {argv[0]!r})")
    for token in argv:
        if not token.startswith("--") or len(token) < 4:
            continue
        name = token.partition("=")[0].lower().replace("_", "-")
        if name in known or "." in name:
            continue
        for flag in close_to(name, known)[:1]:
            hints.append(f"{known[flag]} (for {token.partition('=')[0]})")
    return f" Did you mean {', '.join(hints)}?" if hints else ""


def usage() -> str:
    """The command's short usage: its forms and where the rest is."""
    return (
        f"usage: {PROG} --trial-dir PATH_OR_S3_URI --rule NAME [--param VALUE ...]\n"
        f"       {PROG} rules [NAME] | summary PATH | report OUTPUT_DIR | upload FOLDER S3_URI\n"
        f"       {PROG} batch TRIAL... --rule NAME --output-dir DIR\n"
        f"       {PROG} watch ROOT --rule NAME --output-dir DIR\n"
        f"       {PROG} --help | --version\n"
        f"example: {PROG} --trial-dir examples/trials/vanishing_gradients --rule VanishingGradient"
    )


class SuggestingParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors name the option an unknown one most likely misspells,
    in one line after the usage (exit 2, as argparse)."""

    def error(self, message: str) -> NoReturn:
        hint = ""
        if "unrecognized arguments:" in message:
            options = [o for o in self._option_string_actions if o.startswith("--")]
            found = [
                f"{match[0]} (for {word})"
                for word in message.split(":", 1)[1].split()
                if word.startswith("-") and (match := close_to(word, options, cutoff=0.6))
            ]
            hint = f"; did you mean {', '.join(found)}?" if found else ""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}{hint}\n")
