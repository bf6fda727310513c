"""The smdebug import names: a script written for smdebug runs unchanged on ours."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "smdebug_1_0_34" / "data" / "loss_flat"

SMDEBUG_SCRIPT = textwrap.dedent(f"""
    from smdebug import modes
    from smdebug.trials import create_trial
    from smdebug.exceptions import StepUnavailable, TensorUnavailableForStep
    from smdebug.core.modes import ModeKeys
    from smdebug.core.tensor import StepState
    from smdebug.analysis.utils import no_refresh
    import smdebug

    trial = create_trial({str(FIXTURE)!r})
    assert modes.TRAIN is ModeKeys.TRAIN
    with no_refresh(trial):
        loss = trial.tensor("loss")
        assert loss.steps(mode=modes.EVAL)
        assert trial.has_passed_step(0) == StepState.AVAILABLE
    try:
        loss.value(10**6)
    except StepUnavailable as e:
        assert "is not available as it was not saved" in str(e)
    print("shim" if getattr(smdebug, "__evaluator_shim__", False) else "other", smdebug.__file__)
""")


def run(code: str, *, env_path: str | None = None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}
    if env_path:
        env["PYTHONPATH"] = env_path
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_unchanged_smdebug_script_runs_on_our_implementation(tmp_path: Path) -> None:
    """Without smdebug installed, smdebug.* imports resolve to our shim through the .pth line."""
    result = run(SMDEBUG_SCRIPT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("shim ")


def test_a_real_smdebug_installed_first_is_left_alone(tmp_path: Path) -> None:
    """When another smdebug is importable, it wins; ours stays out of its way."""
    fake = tmp_path / "site" / "smdebug"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    result = run(
        "import smdebug; print(getattr(smdebug, 'REAL', False))",
        env_path=str(tmp_path / "site"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_activate_makes_ours_win_inside_one_process(tmp_path: Path) -> None:
    """evaluator.compat.activate() puts our names first even when another smdebug exists."""
    fake = tmp_path / "site" / "smdebug"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    code = (
        "import smdebug; assert getattr(smdebug, 'REAL', False)\n"
        "import evaluator.compat as c; c.activate()\n"
        "import smdebug.trials, smdebug; print(c.is_active(), hasattr(smdebug.trials, 'create_trial'))"
    )
    result = run(code, env_path=str(tmp_path / "site"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True True"


@pytest.mark.parametrize(
    "module",
    [
        "smdebug.trials",
        "smdebug.exceptions",
        "smdebug.core.modes",
        "smdebug.core.tensor",
        "smdebug.analysis.utils",
    ],
)
def test_each_documented_module_imports(module: str, tmp_path: Path) -> None:
    """Each smdebug module the issue names imports from our shim."""
    result = run(f"import {module}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
