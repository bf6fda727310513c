"""``RequiredTensors``: add / get / get_names / get_tensor_steps / clear / fetch, as smdebug."""

from __future__ import annotations

from typing import Any

import pytest

from evaluator.errors import NoMoreData, StepUnavailable, TensorUnavailable
from evaluator.rules import RequiredTensors


def test_add_records_names_steps_and_tensors(make_trial: Any) -> None:
    """add stores steps per name; get returns the Tensor objects; trial=None is the base."""
    trial = make_trial([0, 1, 2])
    req = RequiredTensors(trial, None)
    req.add("w", [1, 2])
    req.add("loss", [2], trial=trial)
    assert list(req.get_names()) == ["w", "loss"]
    assert req.get_tensor_steps("w") == [1, 2]
    assert [t.name for t in req.get()] == ["w", "loss"]
    assert all(t is trial.tensor(t.name) for t in req.get())


def test_steps_accumulate_without_touching_the_callers_list(make_trial: Any) -> None:
    """Adding a name twice extends its steps (duplicates kept); the caller's list is not changed."""
    req = RequiredTensors(make_trial([0, 1, 2]), [])
    mine = [0, 1]
    req.add("w", mine)
    req.add("w", [1, 2])
    assert req.get_tensor_steps("w") == [0, 1, 1, 2]
    assert mine == [0, 1]


def test_regex_adds_every_match_and_no_match_is_fine(make_trial: Any) -> None:
    """should_match_regex adds each tensor the regex matches; a regex matching none adds none."""
    req = RequiredTensors(make_trial([0]), None)
    req.add("^(w|loss)$", [0], should_match_regex=True)
    req.add("^nothing", [0], should_match_regex=True)
    assert sorted(req.get_names()) == ["loss", "w"]


def test_unknown_name_raises_tensor_unavailable(make_trial: Any) -> None:
    """Without a regex, a tensor the trial never saved raises TensorUnavailable."""
    req = RequiredTensors(make_trial([0]), None)
    with pytest.raises(TensorUnavailable, match="Tensor nope was not saved."):
        req.add("nope", [0])


def test_unknown_steps_raise_key_error(make_trial: Any) -> None:
    """get_tensor_steps of a name never added raises KeyError."""
    with pytest.raises(KeyError):
        RequiredTensors(make_trial([0]), None).get_tensor_steps("w")


def test_clear_forgets_every_trial(make_trial: Any) -> None:
    """clear empties the requirements of the base trial and of the other trials."""
    base, other = make_trial([0], name="a"), make_trial([0], name="b")
    req = RequiredTensors(base, [other])
    req.add("w", [0])
    req.add("w", [0], trial=other)
    req.clear()
    assert not req.get_names() and not req.get_names(trial=other) and not list(req.get(trial=other))


def test_a_trial_the_rule_does_not_have_is_a_key_error(make_trial: Any) -> None:
    """Requirements on a trial that is neither base nor other raise KeyError naming it."""
    req = RequiredTensors(make_trial([0], name="a"), None)
    with pytest.raises(KeyError, match="stranger"):
        req.add("w", [0], trial=make_trial([0], name="stranger"))


def spy_on_values(
    tensor: Any, read: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tensor.value

    def value(step: int, *args: Any, **kwargs: Any) -> Any:
        read.append((tensor.name, step))
        return real(step, *args, **kwargs)

    monkeypatch.setattr(tensor, "value", value)


def test_fetch_waits_for_the_union_then_reads_each_value(
    make_trial: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fetch waits once per trial for the sorted union of steps, then reads every (name, step)."""
    trial = make_trial([0, 1, 2, 3])
    waited: list[list[int]] = []
    read: list[tuple[str, int]] = []
    monkeypatch.setattr(trial, "wait_for_steps", lambda steps, *a: waited.append(list(steps)))
    req = RequiredTensors(trial, None)
    req.add("w", [3, 1])
    req.add("loss", [1, 0])
    for tensor in req.get():
        spy_on_values(tensor, read, monkeypatch)
    req.fetch()
    assert waited == [[0, 1, 3]]
    assert read == [("w", 3), ("w", 1), ("loss", 1), ("loss", 0)]


def test_fetch_with_nothing_required_does_not_wait(
    make_trial: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No requirement means no wait at all."""
    trial = make_trial([0])
    monkeypatch.setattr(trial, "wait_for_steps", lambda *a: pytest.fail("waited"))
    RequiredTensors(trial, None).fetch()


@pytest.mark.parametrize(("step", "error"), [(1, StepUnavailable), (9, NoMoreData)])
def test_fetch_of_a_missing_step_raises(make_trial: Any, step: int, error: type[Exception]) -> None:
    """A step never saved inside the data is StepUnavailable; past the end, NoMoreData."""
    req = RequiredTensors(make_trial([0, 2]), None)
    req.add("w", [step])
    with pytest.raises(error):
        req.fetch()


def test_fetch_covers_the_other_trials(make_trial: Any) -> None:
    """A requirement on another trial is fetched from that trial."""
    base, other = make_trial([0, 1], name="a"), make_trial([0], name="b")
    req = RequiredTensors(base, [other])
    req.add("w", [1], trial=other)
    with pytest.raises(NoMoreData):
        req.fetch()
