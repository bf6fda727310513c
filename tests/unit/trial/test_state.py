"""IndexedState (smdebug output's TrialState): completeness, tokens, StepState without any files."""

from __future__ import annotations

import pytest

from evaluator.errors import SMDebugValueError
from evaluator.formats.index_file import (
    IndexFile,
    IndexMeta,
    ShapeEntry,
    TensorEntry,
    parse_index_columns,
    parse_index_file,
    serialize_index_file,
)
from evaluator.formats.keys import index_key, parse_reduction_tensor_name
from evaluator.modes import ModeKeys, StepState
from evaluator.sources.smdebug.state import IndexedState

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
A, NA, U = StepState.AVAILABLE, StepState.NOT_YET_AVAILABLE, StepState.UNAVAILABLE


def index(
    step: int,
    worker: str,
    mode: ModeKeys = GLOBAL,
    mode_step: int | None = None,
    names: tuple[str, ...] = ("w",),
    shapes: tuple[str, ...] = (),
) -> IndexFile:
    event = f"events/{step:012d}/{step:012d}_{worker}.tfevents"
    return IndexFile(
        meta=IndexMeta(mode, step if mode_step is None else mode_step, event if names else None),
        tensors=tuple(TensorEntry(n, 100 * i, 100) for i, n in enumerate(names)),
        shapes=tuple(ShapeEntry(n, n, (2, 2)) for n in shapes),
    )


def scan(state: IndexedState, files: list[tuple[int, str]], **kw: object) -> None:
    """Apply one listing's files (in key order) and move the token, as a refresh does."""
    keys = sorted((index_key(step, worker), step, worker) for step, worker in files)
    for _, step, worker in keys:
        state.apply_index_file(step, worker, index(step, worker, **kw))
    state.update_index_token(keys[-1][0] if keys else state.last_index_token)


def test_single_worker_every_step_complete() -> None:
    """With one worker every written step is complete and the token sits on the last one."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    scan(state, [(s, "worker_0") for s in (0, 2, 3, 5)])
    assert state.steps(GLOBAL) == [0, 2, 3, 5]
    assert state.last_complete_step == 5
    assert state.last_index_token == index_key(5, "worker_0")
    assert [state.has_passed_step(s, GLOBAL) for s in (0, 1, 5, 6)] == [A, U, A, NA]


def test_partially_written_steps_of_three_workers() -> None:
    """Steps 3-6 written by workers 0 and 2 only: smdebug's has_step scenario answers."""
    state = IndexedState(num_workers=3, workers={"worker_0", "worker_1", "worker_2"})
    files = [(s, w) for s in range(3) for w in ("worker_0", "worker_1", "worker_2")]
    files += [(s, w) for s in range(3, 7) for w in ("worker_0", "worker_2")]
    scan(state, files)
    assert state.steps(GLOBAL) == [0, 1, 2]
    assert state.steps(GLOBAL, show_incomplete_steps=True) == list(range(7))
    assert state.last_complete_step == 2
    assert state.last_index_token == index_key(2, "worker_2")
    assert [state.has_passed_step(s, GLOBAL) for s in range(3, 9)] == [NA] * 6


def test_incomplete_step_window_declares_half_a_window_complete() -> None:
    """Window 10, three workers, only worker_0 writes 0-19: the watermark goes 4, 9, then stays."""
    state = IndexedState(
        num_workers=3, workers={"worker_0", "worker_1", "worker_2"}, incomplete_step_window=10
    )
    scan(state, [(s, "worker_0") for s in range(20)])
    assert state.last_complete_step == 4
    assert state.last_index_token == index_key(4, "worker_2")
    scan(state, [])
    assert state.last_complete_step == 9
    scan(state, [])
    assert state.last_complete_step == 9
    assert state.last_index_token == index_key(9, "worker_2")


def test_mark_all_loaded_completes_every_step() -> None:
    """Once training ended, incomplete steps count as complete and missing ones as skipped."""
    state = IndexedState(num_workers=2, workers={"worker_0", "worker_1"})
    scan(state, [(0, "worker_0"), (0, "worker_1"), (1, "worker_0")])
    assert state.steps(GLOBAL) == [0]
    state.mark_all_loaded()
    assert state.steps(GLOBAL) == [0, 1]
    assert state.has_passed_step(1, GLOBAL) == A
    assert state.has_passed_step(2, GLOBAL) == U


def test_modes_map_mode_steps_to_global_steps() -> None:
    """TRAIN and EVAL mode steps map to global steps; the first mapping seen wins."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    for g, (mode, ms) in enumerate([(TRAIN, 0), (TRAIN, 1), (EVAL, 0), (TRAIN, 2), (EVAL, 1)]):
        state.apply_index_file(g, "worker_0", index(g, "worker_0", mode, ms))
    assert state.all_steps(TRAIN) == [0, 1, 2]
    assert state.all_steps(EVAL) == [0, 1]
    assert state.to_global(EVAL, 1) == 4
    assert list(state.mode_to_global) == [TRAIN, EVAL]
    assert state.global_to_mode[3] == (TRAIN, 2)


def test_shape_and_raw_value_in_one_file_are_both_kept() -> None:
    """A shape entry does not erase the raw tensor's location (smdebug loses the value)."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    state.apply_index_file(0, "worker_0", index(0, "worker_0", names=("b",), shapes=("b",)))
    entry = state.record("b").entries(GLOBAL, 0)["worker_0"]
    assert entry.location is not None and entry.shape == (2, 2)


def test_reduction_tensors_are_attached_to_their_tensor() -> None:
    """``smdebug/reductions/abs_l1/w`` is stored as reduction (l1, abs) of tensor ``w``."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    state.apply_index_file(
        0,
        "worker_0",
        index(0, "worker_0", names=("smdebug/reductions/abs_l1/w", "smdebug/reductions/max/w")),
    )
    assert state.names == {"w"}
    entry = state.record("w").entries(GLOBAL, 0)["worker_0"]
    assert set(entry.reductions) == {("l1", True), ("max", False)}
    assert entry.location is None


@pytest.mark.parametrize(
    "name, expected",
    [
        ("smdebug/reductions/abs_l1/w", ("w", "l1", True)),
        # Where the two parsers differed: smdebug finds the prefix anywhere in the name.
        ("tower_0/smdebug/reductions/max/w", ("w", "max", False)),
        ("smdebug/reductions/mean/dense/kernel:0", ("dense/kernel:0", "mean", False)),
    ],
)
def test_a_reduction_name_is_read_alike_by_the_index_and_the_key_parser(
    name: str, expected: tuple[str, str, bool]
) -> None:
    """The trial files a saved reduction where ``parse_reduction_tensor_name`` (smdebug's
    ``reverse_reduction_tensor_name``) says, even with a scope before the prefix."""
    assert parse_reduction_tensor_name(name) == expected
    state = IndexedState(num_workers=1, workers={"worker_0"})
    state.apply_index_file(0, "worker_0", index(0, "worker_0", names=(name,)))
    tensor, reduction, is_abs = expected
    assert state.names == {tensor}
    entry = state.record(tensor).entries(GLOBAL, 0)["worker_0"]
    assert set(entry.reductions) == {(reduction, is_abs)}


def test_a_reduction_name_without_a_tensor_is_no_tensor() -> None:
    """``smdebug/reductions/max`` names no tensor: it is skipped (smdebug fails to load it)."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    names = ("smdebug/reductions/max", "w")
    state.apply_index_file(0, "worker_0", index(0, "worker_0", names=names))
    assert state.names == {"w"}


def test_files_holding_a_global_step_saved_under_a_mode() -> None:
    """A global step saved as TRAIN is found under GLOBAL through its mode step, and under TRAIN
    by that mode step; a tensor not saved there, or an unknown step, has no files."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    state.apply_index_file(5, "worker_0", index(5, "worker_0", TRAIN, 2, names=("a",)))
    state.apply_index_file(6, "worker_0", index(6, "worker_0", names=("a", "b")))
    assert list(state.files_holding("a", 5, GLOBAL)) == ["worker_0"]
    assert state.files_holding("a", 5, GLOBAL) == state.files_holding("a", 2, TRAIN)
    assert list(state.files_holding("b", 6, GLOBAL)) == ["worker_0"]
    assert state.files_holding("b", 5, GLOBAL) is None
    assert state.files_holding("a", 5, TRAIN) is None
    assert state.files_holding("a", 7, GLOBAL) is None


def test_negative_mode_step_is_rejected() -> None:
    """A negative mode step in an index file raises smdebug's SMDebugValueError."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    with pytest.raises(SMDebugValueError, match="can not be less than 0"):
        state.apply_index_file(0, "worker_0", index(0, "worker_0", TRAIN, -1))


def test_tensor_views_follow_files_applied_after_first_use() -> None:
    """A tensor view made before new files arrive sees them; a worker without it is left out."""
    state = IndexedState(num_workers=2, workers={"worker_0", "worker_1"})
    state.apply_index_file(0, "worker_0", index(0, "worker_0", names=("a", "b")))
    a = state.record("a")
    state.apply_index_file(0, "worker_1", index(0, "worker_1", names=("b",)))
    state.apply_index_file(1, "worker_1", index(1, "worker_1", names=("a",)))
    assert list(a.files(GLOBAL, 0)) == ["worker_0"]
    assert list(a.files(GLOBAL, 1)) == ["worker_1"]
    assert list(state.record("b").files(GLOBAL, 0)) == ["worker_0", "worker_1"]
    assert state.record("nope") is None


def test_event_spans_cover_all_records_of_a_file() -> None:
    """The byte span of an event file covers every record its index lists."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    state.apply_index_file(7, "worker_0", index(7, "worker_0", names=("a", "b", "c")))
    assert state.event_spans["events/000000000007/000000000007_worker_0.tfevents"] == (0, 300)


def test_index_files_share_one_layout_and_one_name_set() -> None:
    """Steps listing the same tensors share one layout and one name set; a step that lists
    others gets its own; locations read back as given."""
    state = IndexedState(num_workers=1, workers={"worker_0"})
    for step in range(3):
        state.apply_index_file(step, "worker_0", index(step, "worker_0", names=("a", "b")))
    state.apply_index_file(3, "worker_0", index(3, "worker_0", names=("b", "c")))
    files = [state.sole_file[s] for s in range(4)]
    assert files[0].layout is files[1].layout is files[2].layout
    assert files[3].layout is not files[0].layout
    assert state.global_step_to_tensors[0] is state.global_step_to_tensors[2]
    assert files[1].location("b") == (100, 100) and files[1].location("c") is None
    assert files[3].tensors == {"b": TensorEntry("b", 0, 100), "c": TensorEntry("c", 100, 100)}


def test_columns_and_entries_give_the_same_state() -> None:
    """An index file parsed as columns is kept as the same file parsed as entries is."""
    data = serialize_index_file(index(4, "worker_0", TRAIN, 2, names=("a", "b"), shapes=("s",)))
    for parse in (parse_index_columns, parse_index_file):
        state = IndexedState(num_workers=1, workers={"worker_0"})
        state.apply_index_file(4, "worker_0", parse(data))
        f = state.sole_file[4]
        assert (f.mode, f.mode_step, f.names) == (TRAIN, 2, frozenset({"a", "b", "s"}))
        assert f.tensors == {"a": TensorEntry("a", 0, 100), "b": TensorEntry("b", 100, 100)}


def test_the_quick_readable_answer_never_contradicts_has_passed_step() -> None:
    """``readable_now`` says yes only where ``has_passed_step`` says AVAILABLE: partial steps
    of several workers, skipped and future steps, before and after the end of training."""
    state = IndexedState(num_workers=2, workers={"worker_0", "worker_1"})
    files = [(s, w) for s in (0, 1, 3) for w in ("worker_0", "worker_1")]
    files += [(5, "worker_0"), (6, "worker_1")]
    scan(state, files)
    for ended in (False, True):
        if ended:
            state.mark_all_loaded()
        quick = {s for s in range(9) if state.readable_now(s)}
        assert quick == {s for s in range(9) if state.has_passed_step(s, GLOBAL) == A}
    assert quick == {0, 1, 3, 5, 6}


def test_files_sharing_parsed_columns_keep_arrays_of_their_own() -> None:
    """Steps whose index payload parsed once (``IndexParser``) share one layout and span; each
    file still has its own ``starts``/``lengths`` arrays (the reader tells files apart by
    them), and a merge into one leaves the others as they were."""
    from evaluator.formats.index_file import IndexParser

    parser = IndexParser()
    state = IndexedState(num_workers=1, workers={"worker_0"})
    for step in range(3):
        data = serialize_index_file(index(step, "worker_0", TRAIN, step, names=("a", "b")))
        state.apply_index_file(step, "worker_0", parser.parse(data))
    files = [state.sole_file[s] for s in range(3)]
    assert files[0].layout is files[1].layout is files[2].layout
    assert files[0].span() == files[2].span() == (0, 200)
    assert files[0].starts == files[1].starts and files[0].starts is not files[1].starts
    assert files[0].lengths is not files[1].lengths
    again = serialize_index_file(index(1, "worker_0", TRAIN, 1, names=("c",)))
    state.apply_index_file(1, "worker_0", parser.parse(again))
    assert files[1].location("c") == (0, 100) and files[1].location("a") == (0, 100)
    assert files[0].location("c") is None and files[2].location("b") == (100, 100)
    assert [f.mode_step for f in files] == [0, 1, 2]
