"""CheckInputImages: running per-channel means, threshold_samples, channel axes and parameter
errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evaluator.errors import ConfigurationError
from evaluator.rules import invoke_rule
from evaluator.rules.coverage import nothing_checked_error
from evaluator.rules.evidence import json_number
from evaluator.trial.trial import Trial
from rules_builtin import check_input_images, registry
from rules_builtin.check_input_images import DEFAULT_REGEX, CheckInputImages

NAME = "hybridsequential0_input_0"
RNG = np.random.default_rng(2)


def raw_images(batch: int) -> np.ndarray:
    """FashionMNIST-like pixels in [0, 1] with mean about 0.29, NCHW with one channel."""
    return (RNG.random((batch, 1, 28, 28)) ** 2.45).astype(np.float32)


def normalised(images: np.ndarray) -> np.ndarray:
    """torchvision's Normalize(0.286, 0.352)."""
    return ((images - 0.286) / 0.352).astype(np.float32)


def fired(rule: CheckInputImages) -> tuple[int, ...]:
    return invoke_rule(rule, raise_eval_cond=False).fired_steps


def test_registered() -> None:
    """The registry finds CheckInputImages by name, any case."""
    assert registry.lookup("CheckInputImages") is CheckInputImages


def test_unnormalised_images_fire_once_500_are_seen(make_trial: Callable[..., Any]) -> None:
    """Raw [0, 1] pixels (mean about 0.29 > 0.2) fire from step 4, when 500 images have been
    seen (100 per step), and at every step after."""
    batches = {s: raw_images(100) for s in range(7)}
    assert abs(np.mean(list(batches.values())) - 0.29) < 0.01
    trial = make_trial({s: {NAME: b} for s, b in batches.items()})
    assert fired(CheckInputImages(trial)) == (4, 5, 6)


def test_normalised_images_do_not_fire(make_trial: Callable[..., Any]) -> None:
    """The same images after Normalize(0.286, 0.352) have mean about 0 and never fire."""
    trial = make_trial({s: {NAME: normalised(raw_images(100))} for s in range(7)})
    assert fired(CheckInputImages(trial)) == ()


def test_fewer_than_threshold_samples_never_fire(make_trial: Callable[..., Any]) -> None:
    """400 raw images are too few to judge with the default threshold_samples of 500."""
    trial = make_trial({s: {NAME: raw_images(100)} for s in range(4)})
    assert fired(CheckInputImages(trial)) == ()
    assert fired(CheckInputImages(trial, threshold_samples="200")) == (1, 2, 3)


def test_any_channel_off_zero_fires_with_channels_last(make_trial: Callable[..., Any]) -> None:
    """NHWC images whose third channel has mean 0.5 fire with channel=-1 or 3; read with
    channel=1 (a pixel row) the offset is shared by three channels (mean about 0.17) and does
    not fire."""
    images = RNG.normal(size=(600, 8, 8, 3)).astype(np.float32)
    images[..., 2] += 0.5
    trial = make_trial({0: {NAME: images}})
    assert fired(CheckInputImages(trial, channel="-1")) == (0,)
    assert fired(CheckInputImages(trial, channel="3")) == (0,)
    assert fired(CheckInputImages(trial, channel="1")) == ()


def test_threshold_mean_is_respected(make_trial: Callable[..., Any]) -> None:
    """Raw images (mean 0.29) do not fire with threshold_mean 0.3."""
    trial = make_trial({0: {NAME: raw_images(600)}})
    assert fired(CheckInputImages(trial, threshold_mean="0.3")) == ()


def test_regex_selects_the_input_tensor(make_trial: Callable[..., Any]) -> None:
    """Only tensors matching regex are accumulated."""
    trial = make_trial({0: {"images": raw_images(600)}})
    assert fired(CheckInputImages(trial)) == ()
    assert fired(CheckInputImages(trial, regex="^images$")) == (0,)


def test_a_tensor_without_the_channel_axis_is_skipped(make_trial: Callable[..., Any]) -> None:
    """A 2-d tensor has no axis 2: it is skipped, not an error."""
    trial = make_trial({0: {NAME: np.ones((600, 3), np.float32)}})
    assert fired(CheckInputImages(trial, channel="2")) == ()


def test_firing_reason_names_tensor_mean_and_threshold(make_trial: Callable[..., Any]) -> None:
    """The firing reason gives the input tensor, its largest |channel mean| and threshold_mean."""
    images = np.full((600, 1, 4, 4), 0.5, np.float32)
    rule = CheckInputImages(make_trial({0: {NAME: images}}))
    assert fired(rule) == (0,)
    (reason,) = rule.evidence.summary()["reasons"]
    assert (reason["step"], reason["tensors"]) == (0, [NAME])
    assert (reason["quantity"], reason["value"]) == ("largest |channel mean|", 0.5)
    assert (reason["parameter"], reason["threshold"], reason["comparison"]) == (
        "threshold_mean",
        0.2,
        ">",
    )
    assert (
        "over 600 images differ from 0 by more than threshold_mean 0.2 at step 0"
        in reason["sentence"]
    )


def test_regex_matching_nothing_checks_nothing(make_trial: Callable[..., Any]) -> None:
    """With no tensor matching regex nothing is recorded; the error names regex and suggests
    one for the closest name."""
    rule = CheckInputImages(make_trial({s: {"conv0_input_0": raw_images(300)} for s in range(2)}))
    assert fired(rule) == ()
    assert not rule.evidence.checked_anything()
    text = str(nothing_checked_error(rule, steps_visited=2))
    assert f"regex {DEFAULT_REGEX!r} selected no tensor" in text
    assert "set regex to select the tensors to check" in text


def test_too_few_images_check_nothing_and_say_so(make_trial: Callable[..., Any]) -> None:
    """Fewer images than threshold_samples: no comparison, and the error says how many were
    seen."""
    rule = CheckInputImages(make_trial({s: {NAME: raw_images(100)} for s in range(4)}))
    assert fired(rule) == ()
    assert rule.evidence.comparisons == 0
    text = str(nothing_checked_error(rule, steps_visited=4))
    assert "at most 400 images seen, fewer than threshold_samples=500" in text
    assert "lower threshold_samples" in text


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("threshold_mean", "small"),
        ("threshold_samples", "many"),
        ("threshold_samples", "0"),
        ("channel", "first"),
        ("channel", "1.5"),
    ],
)
def test_bad_parameter_values_are_configuration_errors(
    make_trial: Callable[..., Any], parameter: str, value: str
) -> None:
    """A value that does not parse names the rule, the parameter and the value."""
    trial = make_trial({0: {NAME: raw_images(2)}})
    with pytest.raises(
        ConfigurationError, match=rf"CheckInputImages parameter {parameter} .*'{value}'"
    ):
        CheckInputImages(trial, **{parameter: value})


def test_parameters_declare_every_constructor_argument() -> None:
    """PARAMETERS lists the constructor's parameters with the documented defaults."""
    declared = {p.name: p.default for p in CheckInputImages.PARAMETERS}
    assert declared == {
        "threshold_mean": "0.2",
        "threshold_samples": "500",
        "regex": DEFAULT_REGEX,
        "channel": "1",
    }


def test_default_selects_the_pytorch_model_input_not_its_loss(
    make_trial: Callable[..., Any],
) -> None:
    """PyTorch's root module input (Net_input_0, a 4-d image batch) is checked by default; the
    class-named loss module's 2-d scores (CrossEntropyLoss_input_0) are no images."""
    images = np.full((500, 1, 2, 2), 0.5, np.float32)
    scores = np.full((500, 3), 0.9, np.float32)
    rule = CheckInputImages(
        make_trial({0: {"Net_input_0": images, "CrossEntropyLoss_input_0": scores}})
    )
    assert invoke_rule(rule, raise_eval_cond=False).fired_steps == (0,)
    assert [r["tensors"] for r in rule.evidence.summary()["reasons"]] == [["Net_input_0"]]


@pytest.mark.parametrize(
    ("channel", "shape"), [("0", (6,)), ("0", (3, 4, 2)), ("1", (4, 3, 5, 5)), ("-1", (2, 5, 5, 3))]
)
def test_running_means_are_the_moveaxis_and_count_array_formula(
    make_trial: Callable[..., Any], channel: str, shape: tuple[int, ...]
) -> None:
    """Each step's largest |channel mean| and the fired sentence's means are, bit for bit,
    those of the first formula: the channel axis moved first, per-channel sums and an array
    of per-channel counts (-0.0 and NaN included)."""
    rng = np.random.default_rng(4)
    batches = [(rng.standard_normal(shape) + 0.3).astype(np.float32) for _ in range(9)]
    batches[0].flat[0] = -0.0
    batches[8].flat[1] = np.nan
    rule = CheckInputImages(
        make_trial({s: {NAME: b} for s, b in enumerate(batches)}),
        channel=channel,
        threshold_samples="1",
        threshold_mean="0.05",
    )
    invoke_rule(rule, raise_eval_cond=False, continue_after_fire=True)
    expected, sentences = [], []
    sums = counts = None
    for step, batch in enumerate(batches):
        value = np.asarray(batch, dtype=np.float64)
        axis = int(channel) % value.ndim
        per_channel = np.moveaxis(value, axis, 0).reshape(value.shape[axis], -1)
        if sums is None or counts is None:
            sums, counts = np.zeros(per_channel.shape[0]), np.zeros(per_channel.shape[0])
        sums += per_channel.sum(axis=1)
        counts += per_channel.shape[1]
        means = sums / np.maximum(counts, 1)
        expected.append([step, json_number(float(np.max(np.abs(means))))])
        sentences.append(str(np.round(means, 4).tolist()))
    (series,) = rule.evidence.series()["series"]
    assert repr(series["points"]) == repr(expected)
    reasons = rule.evidence.summary()["reasons"]
    assert len(reasons) >= 8
    for reason in reasons:
        assert f"channel means {sentences[reason['step']]} over" in reason["sentence"]


@pytest.mark.parametrize(
    ("channel", "batches"),
    [
        (
            "1",
            [np.arange(s, s + 4 * 3 * 5 * 5, dtype=np.uint8).reshape(4, 3, 5, 5) for s in range(7)],
        ),
        ("-1", [RNG.standard_normal((2, 6, 6, 3)).astype(np.float32) + 0.25 for _ in range(7)]),
        ("0", [RNG.standard_normal(8) + 0.5 for _ in range(7)]),
        ("1", [RNG.standard_normal((5, 2)).astype(np.float32) for _ in range(7)]),  # skipped
        ("1", [RNG.random((2, 3 if s < 4 else 4, 4, 4)).astype(np.float32) for s in range(7)]),
        ("5", [RNG.random((2, 3, 4, 4)).astype(np.float32) for _ in range(7)]),  # warned
        ("1", [RNG.random((s % 2 * 2, 3, 2, 2)) + 0.5 for s in range(7)]),  # some empty
        ("-1", [np.full((2, 2, 2, 3), s % 3, np.int64) for s in range(7)]),  # not in windows
    ],
)
def test_windows_give_the_evidence_of_the_per_step_path(
    make_trial: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    channel: str,
    batches: list[np.ndarray],
) -> None:
    """Per-channel sums over windows (in chunks of rows or all at once) and over each step's
    batch alone (a trial without a batch read, as smdebug's) give the same comparisons,
    series, firings and warnings."""

    def run() -> str:
        rule = CheckInputImages(
            make_trial({s: {NAME: b} for s, b in enumerate(batches)}),
            channel=channel,
            threshold_samples="3",
            threshold_mean="0.3",
        )
        warned: list[str] = []
        monkeypatch.setattr(rule.logger, "warning", lambda *a: warned.append(a[0] % a[1:]))
        steps = fired(rule)
        return json.dumps([steps, rule.evidence.summary(), rule.evidence.series(), warned])

    windowed = run()
    monkeypatch.setattr(check_input_images, "_CHUNK_BYTES", 1)  # a row at a time
    assert run() == windowed
    monkeypatch.setattr(Trial, "columns", None)  # no batch read: each batch alone
    assert windowed == run()
