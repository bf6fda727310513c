"""CheckInputImages: input images that were not normalised to zero mean."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluator.rules.evidence import SelectionHint
from evaluator.rules.kit.params import Param, parse_float, parse_int
from evaluator.rules.kit.selection import TensorSelection
from evaluator.rules.kit.windows import FLOATS, WindowedRows
from evaluator.rules.rule import Rule
from evaluator.rules.shown_steps import step_words
from rules_builtin.registry import register

__all__ = ["DEFAULT_REGEX", "CheckInputImages"]

# The model's input, as SageMaker (MXNet HybridSequential) and PyTorch (the root module,
# named after the model's class) name it.
DEFAULT_REGEX = r".*hybridsequential0_input_0,^[A-Z][A-Za-z0-9]*_input_0$"

_CHUNK_BYTES = 4 * 1024 * 1024

# Pixels as saved: floats, or integers (raw 8-bit images); float64 holds each exactly as the
# per-step conversion does.
_NUMBERS = FLOATS + tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32))


@dataclass
class _ChannelMeans:
    """Running per-channel sums of one input tensor over every step seen. Every channel
    counts the same elements, so one count (a float64, as an array of counts would hold it)
    serves them all."""

    sums: np.ndarray
    count: float = 0.0
    images: int = 0

    def divisor(self) -> float:
        return max(self.count, 1.0)

    def means(self) -> np.ndarray:
        return self.sums / self.divisor()


@dataclass(frozen=True)
class _NoChannelAxis:
    """A saved batch without the ``channel`` axis: its shape."""

    shape: tuple[int, ...]


@register
class CheckInputImages(Rule):
    """Fires at a step when, for an input tensor matching ``regex``, at least
    ``threshold_samples`` images (default 500) have been seen in total and the mean of some
    channel over all of them differs from 0 by more than ``threshold_mean`` (default 0.2).

    The default selects the model's input as each hook names it: SageMaker's
    ``.*hybridsequential0_input_0`` (an MXNet ``HybridSequential``) and PyTorch's root module,
    named after the model's class (``Net_input_0``). A tensor with fewer than three axes is no
    batch of images and is skipped (a loss module, also class-named, takes 2-d scores).
    Keras does not name its model input apart from the layers: set ``regex`` to the first
    layer's ``<layer>/inputs`` (and ``channel=-1`` for NHWC).

    Each saved batch is added to running per-channel sums: the mean is taken over every axis
    except ``channel`` (default 1, as in MXNet's NCHW; negative counts from the end, e.g. -1
    for NHWC), axis 0 counts the images (when ``channel`` is 0, each saved tensor is one
    image). Only sums and counts are kept, one per channel. Raw pixels scaled to [0, 1]
    (FashionMNIST: mean about 0.29) fire; the same images normalised to zero mean do not.
    Once the condition holds the rule keeps firing while it does. A tensor whose rank cannot
    hold ``channel``, or whose channel count changes, is skipped at that step (logged).
    """

    PARAMETERS = (
        Param(
            "threshold_mean",
            "0.2",
            "float",
            "Fire when a channel's mean differs from 0 by more than this.",
        ),
        Param("threshold_samples", "500", "int", "Images to see before judging."),
        Param(
            "regex",
            DEFAULT_REGEX,
            "list",
            "Regular expressions of the input image tensors (comma-separated).",
        ),
        Param("channel", "1", "int", "Axis of the colour channel in the input tensor."),
    )

    def __init__(
        self,
        base_trial: Any,
        threshold_mean: str | float = "0.2",
        threshold_samples: str | int = "500",
        regex: str | None = DEFAULT_REGEX,
        channel: str | int = "1",
        action_str: str | None = None,
    ) -> None:
        super().__init__(base_trial, action_str)
        name = self.rule_name
        self.threshold_mean = parse_float(name, "threshold_mean", threshold_mean)
        self.threshold_samples = parse_int(name, "threshold_samples", threshold_samples, minimum=1)
        self.selection = TensorSelection(name, None, regex, regex_parameter="regex")
        self.channel = parse_int(name, "channel", channel)
        self._inputs: dict[str, _ChannelMeans] = {}
        # The per-channel sums of a window of saved batches at once (where the trial has a
        # batch read), else of the step's batch alone (any dtype float64 takes, empty ones
        # too: they count no images).
        self._rows = WindowedRows(
            base_trial,
            self._channel_sums,
            dtypes=_NUMBERS,
            flatten=False,
            alone_dtypes=None,
            empty=True,
        )

    def selection_hints(self) -> list[SelectionHint]:
        hint = self.selection.hint()
        if self._inputs:  # tensors matched, but too few images to judge
            seen = max(r.images for r in self._inputs.values())
            return [
                dataclasses.replace(
                    hint,
                    description=f"{hint.description} (at most {seen} images seen, fewer than "
                    f"threshold_samples={self.threshold_samples})",
                    advice="lower threshold_samples, or save the input images at more steps",
                )
            ]
        return [hint]

    def invoke_at_step(self, step: int) -> bool:
        fired = False
        names = self.selection.names(self.base_trial, step=step)
        for name in names:
            row = self._rows.get(name, step, names)
            if isinstance(row, _NoChannelAxis):
                self.logger.warning(
                    "%s: %s has shape %s, no axis %d for the channel; skipped at step %d",
                    self.rule_name,
                    name,
                    row.shape,
                    self.channel,
                    step,
                )
                continue
            if row is None:
                continue  # no raw value, or not a batch of images (scores, labels)
            sums, elements, images = row
            running = self._accumulate(name, sums, elements, images, step)
            if running is None or running.images < self.threshold_samples:
                continue
            # max |sum / n| over the channels is max |sum| / n, bit for bit (dividing by n > 0
            # is monotonic and keeps the sign); the means are needed only for a firing.
            worst = float(np.abs(running.sums).max()) / running.divisor()
            if self.evidence.compare(
                step,
                name,
                quantity="largest |channel mean|",
                value=worst,
                parameter="threshold_mean",
                threshold=self.threshold_mean,
                fires_when=">",
                sentence=lambda: (
                    f"{self.rule_name}: {name} channel means "
                    f"{np.round(running.means(), 4).tolist()} over {running.images} images "
                    f"differ from 0 by more than threshold_mean {self.threshold_mean:g} "
                    f"at {step_words(self.base_trial, step)}"
                ),
            ):
                fired = True
        return fired

    def _accumulate(
        self, name: str, sums: np.ndarray, elements: int, images: int, step: int
    ) -> _ChannelMeans | None:
        """Add one saved batch's per-channel ``sums`` (of ``elements`` values per channel,
        ``images`` images) to the running sums of ``name``."""
        running = self._inputs.get(name)
        if running is None:
            running = self._inputs[name] = _ChannelMeans(np.zeros(sums.shape[0]))
        elif running.sums.shape[0] != sums.shape[0]:
            self.logger.warning(
                "%s: %s now has %d channels instead of %d; skipped at step %d",
                self.rule_name,
                name,
                sums.shape[0],
                running.sums.shape[0],
                step,
            )
            return None
        running.sums += sums
        running.count += elements
        running.images += images
        return running

    def _channel_sums(self, stacked: np.ndarray) -> list[Any]:
        """Per row of a window (one saved batch each, or one batch alone): its per-channel
        sums, elements per channel and images (numpy sums each row of the C-contiguous stack
        as it sums the batch alone; tests pin it). None per row for a tensor that is no batch
        of images; ``_NoChannelAxis`` for one without the channel axis (the rule says so)."""
        ndim = stacked.ndim - 1
        if ndim < 3 and self.channel != 0:
            return [None] * len(stacked)
        if not -ndim <= self.channel < ndim:
            return [_NoChannelAxis(stacked.shape[1:])] * len(stacked)
        axis = self.channel % ndim
        channels, images = stacked.shape[axis + 1], stacked.shape[1] if axis != 0 else 1
        elements = stacked[0].size // channels
        rows: list[tuple[np.ndarray, int, int]] = []
        # A few MiB of rows at a time: the float64 copies of a window of uint8 images would
        # hold 8 (and, moved, 16) times the window.
        chunk = max(1, _CHUNK_BYTES // max(1, 8 * stacked[0].size))
        for start in range(0, len(stacked), chunk):
            values = stacked[start : start + chunk].astype(np.float64)
            moved = values if axis == 0 else np.moveaxis(values, axis + 1, 1)
            per_channel = moved.reshape(len(values), channels, -1)
            rows.extend((sums, elements, images) for sums in per_channel.sum(axis=2))
        return rows
