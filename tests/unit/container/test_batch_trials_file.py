"""``--trials-file`` is read within bounds (issue 40): a device, a FIFO or a file over
``TRIALS_FILE_LIMIT`` is a ConfigurationError naming it, before anything is read (before:
``/dev/zero`` read 3.8 GB then exit 3, a FIFO hung the batch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from container.batch.trials import TRIALS_FILE_LIMIT, Trial, find_trials
from evaluator.errors import ConfigurationError


def _trial(root: Path, name: str) -> Path:
    (root / name / "index").mkdir(parents=True)
    return root / name


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_not_read(device: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{device}.*not a regular file"):
        find_trials([], [device])


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "list"
    os.mkfifo(fifo)
    with pytest.raises(ConfigurationError, match="a FIFO"):
        find_trials([], [str(fifo)])


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "list"
    big.touch()
    os.truncate(big, TRIALS_FILE_LIMIT + 1)  # sparse: nothing to read but zeros
    with pytest.raises(ConfigurationError, match=f"over the limit of {TRIALS_FILE_LIMIT}"):
        find_trials([], [str(big)])


def test_a_link_to_a_list_is_followed(tmp_path: Path) -> None:
    """The user's own list may be a symbolic link (dotfiles, a shared config): it is read."""
    trial = _trial(tmp_path, "a")
    listing = tmp_path / "real.txt"
    listing.write_text(f"# one trial\n{trial}\n")
    (tmp_path / "link.txt").symlink_to(listing)
    assert find_trials([], [str(tmp_path / "link.txt")]) == [Trial("a", str(trial))]
