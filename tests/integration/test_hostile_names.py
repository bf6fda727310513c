"""Text a trial or a user controls never drives the terminal, and URL secrets never reach the
log (issue #25): ANSI escapes in tensor names with ``--log-format console``, ``?token=`` and
webhook paths in parameters."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from tests.support.evaluator_cli import EvaluatorCli

EVIL = "loss\x1b[2J\x1b]0;owned\x07\x9b31m"


def _trial(root: Path) -> Path:
    writer = TrialWriter(root)
    writer.write_collections([Collection("losses", tensor_names={EVIL})])
    for step in range(3):
        writer.write_step(
            step, {EVIL: np.array([np.nan, 1.0], dtype=np.float32)}, mode=ModeKeys.TRAIN
        )
    writer.end_training()
    return root


def test_control_characters_in_tensor_names_are_escaped_on_the_console(tmp_path: Path) -> None:
    """A tensor named with ANSI and OSC escapes fires ExplodingTensor: the console log shows
    the name escaped, with no control character but newlines."""
    trial = _trial(tmp_path / "trial")
    run = EvaluatorCli(tmp_path)(
        "--trial-dir", str(trial), "--rule", "ExplodingTensor", "--log-format", "console"
    )
    assert run.returncode == 1, run.describe()
    assert "\\x1b[2J" in run.stdout
    assert not any(ch in run.stdout for ch in "\x1b\x07\x9b\r")


def test_url_secrets_in_parameters_are_masked(tmp_path: Path) -> None:
    """A webhook URL and a ?token= query given as rule parameters appear in no log line, the
    result file or the message."""
    trial = _trial(tmp_path / "trial")
    hook = "https://hooks.slack.com/services/T0000/B0000/Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"
    query = "https://example.com/notify?channel=ml&token=s3cr3tT0ken"
    run = EvaluatorCli(tmp_path)(
        "--trial-dir",
        str(trial),
        "--rule",
        "ExplodingTensor",
        "--webhook_url",
        hook,
        "--notify_url",
        query,
    )
    everything = run.stdout + run.stderr + (run.message or "") + run.result_path.read_text()
    assert "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2" not in everything, run.describe()
    assert "s3cr3tT0ken" not in everything, run.describe()
