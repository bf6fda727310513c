"""Users' regexes over tensor names: RE2 where it means what Python means, Python's re (in a
child process under a time limit) elsewhere, the answers always those of ``re.search``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluator.errors import SMDebugValueError
from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from evaluator.trial import create_trial
from evaluator.trial.patterns import compile_pattern, matching_names

EVIL = "^(a+)+$"


def test_a_catastrophic_pattern_runs_on_re2_and_answers() -> None:
    """``^(a+)+$`` against a long name that almost matches answers (Python's re backtracks
    for ever on it)."""
    pattern = compile_pattern(EVIL, what="test")
    assert pattern.engine == "re2"
    assert not pattern.search("a" * 100_000 + "!")
    assert pattern.search("a" * 100_000)


def test_a_pattern_over_the_length_limit_is_refused_naming_it() -> None:
    """A pattern longer than max_length is refused, the error naming the source and the limit."""
    with pytest.raises(SMDebugValueError, match=r"tensor_names\(regex=...\).*over the limit of 10"):
        compile_pattern("a" * 11, what="tensor_names(regex=...)", max_length=10)


def test_an_invalid_pattern_fails_as_python_re_does() -> None:
    """A pattern Python cannot compile raises re.error, whatever RE2 would make of it."""
    with pytest.raises(re.error):
        compile_pattern("(?U)a+", what="test")  # RE2: ungreedy; Python: an error


@pytest.mark.parametrize(
    ("pattern", "names"),
    [
        (r"(w)\1", ["ww", "wx"]),  # backreference: RE2 cannot
        (r"^(?!.*bias).*weight", ["fc.weight", "fc.bias_weight"]),  # lookahead: RE2 cannot
        (r"x{,2}y$", ["xy", "x{,2}y", "zy"]),  # Python {0,2}; RE2 would read a literal
        (r"[[:alpha:]]", ["a", ":", "["]),  # Python: a set of characters; RE2: a POSIX class
        (r"^\w+$", ["é_layer", "plain", "a b"]),  # Unicode \w on a non-ASCII name
        (r"loss$", ["loss\n", "loss"]),  # Python's $ before a trailing newline
        (r"\B", ["", "ab"]),  # Python's \B never matches an empty string; RE2's does
    ],
)
@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
def test_patterns_and_names_re2_reads_differently_answer_as_python(
    pattern: str, names: list[str]
) -> None:
    """Where RE2 cannot run a pattern or reads it differently, the answer is Python's."""
    expected = {n for n in names if re.search(pattern, n)}
    assert compile_pattern(pattern, what="test").matching(names) == expected


def test_a_slow_fallback_pattern_is_stopped_with_a_clear_error() -> None:
    """A pattern RE2 cannot run that backtracks for ever is stopped at fallback_seconds, the
    error naming the source and the option."""
    pattern = compile_pattern(
        r"^(?=(a+)+$)b", what="include_regex of collection 'x'", fallback_seconds=0.5
    )
    assert pattern.engine == "re"
    with pytest.raises(SMDebugValueError, match="collection 'x'.*regex_fallback_timeout"):
        pattern.search("a" * 60 + "!")


def test_fallback_answers_are_remembered() -> None:
    """A name matched once by the fallback is answered again without another child process."""
    pattern = compile_pattern(r"(?<=conv)_w", what="test-memo")
    assert pattern.matching(["conv_w", "fc_w"]) == {"conv_w"}
    pattern._fallback_seconds = 0.0  # a child process would now fail at once
    assert pattern.matching(["conv_w", "fc_w"]) == {"conv_w"}


def test_match_is_anchored_at_the_start_as_re_match() -> None:
    """``match`` answers as ``re.match``, ``search`` as ``re.search``, on both engines."""
    for text in ("b", r"(?<=a)b|^b"):
        pattern = compile_pattern(text, what="test")
        assert pattern.search("ab") and not pattern.match("ab")
        assert pattern.match("b")


def test_compiled_python_patterns_keep_their_flags() -> None:
    """A compiled ``re.Pattern`` is accepted and its IGNORECASE flag is kept."""
    pattern = compile_pattern(re.compile("LOSS", re.IGNORECASE), what="test")
    assert pattern.engine == "re2"
    assert matching_names(["train_loss", "acc"], [pattern]) == {"train_loss"}


@settings(max_examples=300, deadline=None)
@given(
    pattern=st.from_regex(
        r"[\^$]?([ab.]|\\[dws]|\[a-c\]|\(a\|b\))[*+?]?([ab.]|\\b)?[$]?", fullmatch=True
    ),
    name=st.text(alphabet="ab c1_./", max_size=12),
)
def test_re2_answers_as_python_search_on_plain_names(pattern: str, name: str) -> None:
    """On printable ASCII names, the RE2 path answers as ``re.search`` for common syntax."""
    compiled = compile_pattern(pattern, what="test")
    assert compiled.search(name) == (re.search(pattern, name) is not None)


def test_tensor_names_regex_goes_through_re2(tmp_path: Path) -> None:
    """``tensor_names(regex=...)`` with a catastrophic pattern and a long saved name answers,
    and an over-long regex argument is refused naming the parameter."""
    long_name = "a" * 5000 + "!"
    writer = TrialWriter(tmp_path)
    writer.write_collections([Collection("all", include_regex=[EVIL])])
    writer.write_step(0, {long_name: np.float32(1), "aaa": np.float32(2)}, mode=ModeKeys.TRAIN)
    writer.end_training()
    trial = create_trial(str(tmp_path), max_regex_length=100)
    assert trial.tensor_names(regex=EVIL) == ["aaa"]
    assert trial.tensor_names(collection="all") == ["aaa"]
    with pytest.raises(SMDebugValueError, match=r"regex=.*over the limit of 100"):
        trial.tensor_names(regex="x" * 101)
