"""A third party's input format, from a package of its own (tests/plugins/csv_format): found
through the entry-point group ``rule_evaluator.sources`` and read by a built-in rule through
the command, as a user who installed it would run it.

The package is installed the light way, as pip leaves an installed package behind: its
``.dist-info`` folder (METADATA and entry_points.txt) in a folder on ``PYTHONPATH``, beside the
package's own folder. Nothing is installed into the test's environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.evaluator_cli import ROOT, EvaluatorCli

PLUGIN = ROOT / "tests" / "plugins" / "csv_format"


def _installed(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that has the CSV format installed."""
    site = tmp_path / "site"
    info = site / "rule_evaluator_csv_format-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rule-evaluator-csv-format\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text("[rule_evaluator.sources]\ncsv = csv_format:FORMAT\n")
    return {"PYTHONPATH": os.pathsep.join([str(site), str(PLUGIN)])}


def _losses(folder: Path, losses: list[float]) -> Path:
    folder.mkdir(parents=True)
    rows = ["step,tag,value"] + [f"{10 * s},train_loss,{v}" for s, v in enumerate(losses)]
    (folder / "metrics.csv").write_text("\n".join(rows) + "\n")
    return folder


def _run(
    tmp_path: Path, trial: Path, env: dict[str, str] | None = None
) -> tuple[dict[str, str], dict[str, object]]:
    cli = EvaluatorCli(tmp_path / "cli")
    run = cli(
        "--trial-dir",
        str(trial),
        "--rule",
        "LossNotDecreasing",
        env={**_installed(tmp_path), **(env or {})},
    )
    assert run.result is not None, run.describe()
    return {r["rule"]: r["status"] for r in run.result["rules"]}, run.event("evaluation_started")


def test_a_plug_in_format_is_detected_and_a_built_in_rule_finds_a_flat_loss(
    tmp_path: Path,
) -> None:
    """A CSV of a loss that stops falling: the format is detected (auto) from its keys, and
    LossNotDecreasing fires on it."""
    trial = _losses(tmp_path / "flat", [2.0, 1.5, 1.2, 1.0] + [1.0] * 40)
    statuses, started = _run(tmp_path, trial)
    assert started["trial_kind"] == "csv"
    assert "CSV files carry no end marker" in str(started["waits_for"])
    assert statuses == {"LossNotDecreasing": "IssuesFound"}


def test_a_plug_in_format_named_by_trial_format_reads_a_falling_loss_as_healthy(
    tmp_path: Path,
) -> None:
    """The same format named explicitly: a steadily falling loss gives no issue."""
    trial = _losses(tmp_path / "falling", [2.0 * 0.95**s for s in range(60)])
    statuses, started = _run(tmp_path, trial, {"EVALUATOR_TRIAL_FORMAT": "csv"})
    assert started["trial_kind"] == "csv"
    assert statuses == {"LossNotDecreasing": "NoIssuesFound"}


def test_without_the_plug_in_an_unknown_format_is_a_client_error_naming_the_known_ones(
    tmp_path: Path,
) -> None:
    """trial_format=csv with the package not installed: exit 2, and the message names the
    formats that are known and where a plug-in registers."""
    trial = _losses(tmp_path / "alone", [1.0] * 20)
    run = EvaluatorCli(tmp_path / "cli")(
        "--trial-dir",
        str(trial),
        "--rule",
        "LossNotDecreasing",
        env={"EVALUATOR_TRIAL_FORMAT": "csv"},
    )
    assert run.returncode == 2, run.describe()
    assert run.message is not None
    assert "unknown trial_format 'csv'" in run.message
    assert "smdebug, tensorboard" in run.message and "rule_evaluator.sources" in run.message


pytestmark = pytest.mark.slow
