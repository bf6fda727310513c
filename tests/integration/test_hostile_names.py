"""Text a trial or a user controls never drives the terminal, and URL secrets never reach the
log (issue #25): ANSI escapes in tensor names with ``--log-format console`` and in
``summary``, ``?token=`` and webhook paths in parameters; a tag that holds ``<!--<script>`` or
``</script>`` never bends the HTML report (issue #40)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from evaluator.formats import Collection
from evaluator.modes import ModeKeys
from evaluator.testing import TrialWriter
from tests.support.evaluator_cli import EvaluatorCli
from tests.support.html_check import parse

ROOT = Path(__file__).resolve().parents[2]
EVIL = "loss\x1b[2J\x1b]0;owned\x07\x9b31m"
MARKUP = "loss/<!--<script>\x1b\x07\x00</script>&\u2028"


def _trial(root: Path, name: str = EVIL) -> Path:
    writer = TrialWriter(root)
    writer.write_collections([Collection("losses", tensor_names={name})])
    for step in range(3):
        writer.write_step(
            step, {name: np.array([np.nan, 1.0], dtype=np.float32)}, mode=ModeKeys.TRAIN
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


def test_summary_escapes_control_characters_in_tag_names(tmp_path: Path) -> None:
    """``rule-evaluator summary`` shows a tensor name's ESC, BEL, C1 and NUL as \\xNN: nothing
    raw reaches the terminal; ``--json`` escapes them as JSON does."""
    trial = _trial(tmp_path / "trial", EVIL + "\x00\nforged line")
    command = [sys.executable, "-m", "container.cli", "summary", str(trial)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not any(ch in done.stdout for ch in "\x1b\x07\x9b\x00\r"), repr(done.stdout)
    assert "loss\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\x00\\x0aforged line" in done.stdout
    assert not any(line.startswith("forged line") for line in done.stdout.splitlines())
    as_json = subprocess.run([*command, "--json"], cwd=ROOT, capture_output=True, timeout=120)
    assert not any(ch in as_json.stdout for ch in b"\x1b\x07\x00")
    assert EVIL + "\x00\nforged line" in json.loads(as_json.stdout)["tensors"]


def _strings(value: object) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, list) else []


def _rising_loss(root: Path, name: str) -> Path:
    writer = TrialWriter(root)
    writer.write_collections([Collection("losses", tensor_names={name})])
    for step in range(30):
        writer.write_step(step, {name: np.float32(1.0 + step / 10)}, mode=ModeKeys.TRAIN)
    writer.end_training()
    return root


def test_markup_in_a_tag_never_bends_the_report(tmp_path: Path) -> None:
    """A loss named ``loss/<!--<script>...</script>`` with ESC, BEL, NUL and U+2028 that does
    not decrease fires LossNotDecreasing: the report is well-formed, every chart's inline data
    holds no ``<``, ``>`` or ``&`` (so no ``<!--`` or ``</script>`` can reach the script
    element) and still reads back as the name, and no raw ESC, BEL or NUL byte is in the
    page."""
    trial = _rising_loss(tmp_path / "trial", MARKUP)
    run = EvaluatorCli(tmp_path)("--trial-dir", str(trial), "--rule", "LossNotDecreasing")
    assert run.returncode == 1, run.describe()
    report = run.output_dir / "rule_report.html"
    raw = report.read_bytes()
    assert not any(b in raw for b in (b"\x1b", b"\x07", b"\x00")), "raw control bytes"
    page = raw.decode("utf-8")
    specs = re.findall(r'<script type="application/json" class="chart-spec">(.*?)</script>', page)
    assert specs, "the report has no chart to check"
    for text in specs:
        assert not set(text) & set("<>&\u2028\u2029"), text
    assert any(MARKUP in s for text in specs for s in _strings(json.loads(text)))
    checked = parse(report)
    assert not checked.errors and not checked.stack, checked.errors
    assert "The curves behind the verdict" in "".join(checked.text)
    assert "loss/<!--<script>\\x1b\\x07\\x00</script>&" in "".join(checked.text)
