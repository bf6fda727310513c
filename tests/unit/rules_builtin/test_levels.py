"""rules_builtin._levels: when a noisy loss's single values decide, and what a fall beyond the
noise of two window means is."""

from __future__ import annotations

import math

from rules_builtin._levels import LossView, fell_beyond_noise, rose_beyond_noise, single_decides


def test_a_fall_beyond_diff_percent_and_one_standard_error_counts() -> None:
    """Noise 10 % of the level over two windows of 10 values: one standard error of the
    difference is 4.47 %, so with diff_percent 0.1 a fall of 4.7 % counts and 4.5 % does not."""
    assert fell_beyond_noise(95.3, 100.0, 10.0, 0.1, (10, 10))
    assert not fell_beyond_noise(95.5, 100.0, 10.0, 0.1, (10, 10))


def test_the_standard_error_shrinks_with_the_values_averaged() -> None:
    """The same 3 % fall is within the noise of a window against one value (SE 10.5 %) and
    beyond it for two windows of 100 values (SE 1.4 %)."""
    assert not fell_beyond_noise(97.0, 100.0, 10.0, 0.1, (10, 1))
    assert fell_beyond_noise(97.0, 100.0, 10.0, 0.1, (100, 100))


def test_a_nan_or_rising_mean_never_fell() -> None:
    """A NaN mean and a rise are no fall, whatever the noise (0 included)."""
    assert not fell_beyond_noise(math.nan, 100.0, 0.0, 0.1, (10, 10))
    assert not fell_beyond_noise(101.0, 100.0, 0.0, 0.1, (10, 10))
    assert not fell_beyond_noise(1.0, 0.0, 0.0, 0.1, (10, 10))


def test_a_jump_beyond_two_standard_errors_of_two_single_values_is_a_rise() -> None:
    """Noise 10 % of the level: a difference of two single values has an SE of 14.1 %, so with
    diff_percent 0.1 a rise of 28.5 % is a jump (beyond 2 SE) and 28.2 % is not; a fall never."""
    assert rose_beyond_noise(1.285, 1.0, 10.0, 0.1)
    assert not rose_beyond_noise(1.282, 1.0, 10.0, 0.1)
    assert not rose_beyond_noise(0.5, 1.0, 10.0, 0.1)


def test_single_values_decide_only_when_neither_they_nor_the_windows_fell() -> None:
    """Single values that show no fall decide unless the window means fell beyond the noise;
    single values that fell, or a NaN one, never decide (the window means do)."""
    flat, lower = (1.0, 10, 10), (0.9, 20, 20)
    assert single_decides(flat, flat, 0.1, windows_fell=False)
    assert not single_decides(flat, flat, 0.1, windows_fell=True)
    assert not single_decides(lower, flat, 0.1, windows_fell=False)
    assert not single_decides((math.nan, 20, 20), flat, 0.1, windows_fell=False)


def test_a_view_of_a_loss_logged_at_every_step_keeps_the_window_before_the_anchors() -> None:
    """Logged at every step with num_steps 10: at step 40 (anchor 30) the steps 11..40 are kept,
    the window before the anchor's included; a view with grown windows keeps only 21..40."""
    dense, grown = LossView(), LossView(needed=5)
    for s in range(41):
        dense.add(s, s, 10)
        grown.add(s, s, 10)
    assert [m for m, _ in dense.saved] == list(range(11, 41))
    assert [m for m, _ in grown.saved] == list(range(21, 41))
    assert [m for m, _ in dense.window(20, 10)] == list(range(11, 21))
