"""Open a report in Debian's headless ``chromium`` as a person would: a screenshot, every
console message the page caused, the rendered DOM, and how long the page took to load.

The page is opened inside a one-line wrapper page whose ``<iframe onload>`` logs
``performance.now()`` to the console, so the load time is the browser's own measure. Console
lines come from ``--enable-logging=stderr --v=0`` (``INFO:CONSOLE`` lines); the report has no
script, so any console line at all is a fault."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["BrowserView", "chromium", "non_blank_share", "open_page"]

TIMEOUT = 90.0
WIDTH, HEIGHT = 1100, 1600
_CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)$")
_LOADED = re.compile(r'"report-loaded-ms=([0-9.]+)"')


@dataclass
class BrowserView:
    screenshot: Path
    console: list[str]  # console messages of the report (the wrapper's timing line excluded)
    load_ms: float | None
    dom: str


def chromium() -> str:
    """The chromium binary; without one the test skips loudly, or fails when CI=true."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    reason = (
        "chromium is not installed: the browser tests of the rule report did not run "
        "(apt-get install -y chromium; .ci/run installs it)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    warnings.warn(reason, stacklevel=2)
    pytest.skip(reason)


def _run(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile.mkdir(parents=True, exist_ok=True)
    command = [
        binary,
        "--headless",
        "--no-sandbox",  # tests run as root in CI
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
        *args,
    ]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=TIMEOUT, check=False, cwd=profile
    )


def open_page(binary: str, page: Path, workdir: Path) -> BrowserView:
    """Screenshot ``page`` (through the timing wrapper) and dump its DOM."""
    workdir.mkdir(parents=True, exist_ok=True)
    wrapper = workdir / "open.html"
    wrapper.write_text(
        '<!DOCTYPE html><html><body style="margin:0">'
        f'<iframe src="{page.absolute().as_uri()}" '
        f'style="width:{WIDTH}px;height:{HEIGHT}px;border:0" '
        "onload=\"console.log('report-loaded-ms=' + performance.now().toFixed(1))\">"
        "</iframe></body></html>",
        encoding="utf-8",
    )
    shot = workdir / "screenshot.png"
    run = _run(
        binary,
        workdir / "profile",
        "--enable-logging=stderr",
        "--v=0",
        f"--screenshot={shot}",
        wrapper.as_uri(),
    )
    assert shot.is_file(), f"chromium wrote no screenshot (exit {run.returncode}): {run.stderr}"
    lines = [m.group(1) for line in run.stderr.splitlines() if (m := _CONSOLE.search(line))]
    loaded = [float(m.group(1)) for line in lines if (m := _LOADED.search(line))]
    dom = _run(binary, workdir / "profile-dom", "--dump-dom", page.absolute().as_uri()).stdout
    return BrowserView(
        shot,
        [line for line in lines if not _LOADED.search(line)],
        loaded[0] if loaded else None,
        dom,
    )


def non_blank_share(screenshot: Path) -> float:
    """The share of the screenshot's pixels that are not (near) white."""
    from PIL import Image

    with Image.open(screenshot) as image:
        grey = image.convert("L")
        histogram = grey.histogram()
        return sum(histogram[:240]) / (grey.width * grey.height)
