"""Open a report in Debian's headless ``chromium`` as a person would: a screenshot, every
console message the page caused, the rendered DOM, and how long the page took to load.

The page is opened inside a one-line wrapper page whose ``<iframe onload>`` logs
``performance.now()`` to the console, so the load time is the browser's own measure. Console
lines come from ``--enable-logging=stderr --v=0`` (``INFO:CONSOLE`` lines); the report's
scripts log nothing, so any console line at all (an exception, a fetch the page's policy
blocked) is a fault. ``probe_page`` works the charts with the pointer and reads back what
they showed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["BrowserView", "chromium", "drawn_charts", "non_blank_share", "open_page", "probe_page"]

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


# Run in the page once it has loaded: hover the first chart at its first firing step (or its
# first step), drag across the middle half of its steps, and write what the page showed into
# a <pre id="probe"> as JSON (read back from the dumped DOM).
_PROBE = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = {charts: 0, resources: performance.getEntriesByType("resource").map(function (e) {
    return e.name; })};
  var charts = window.ruleReportCharts || [];
  out.charts = charts.length;
  out.failed = Array.prototype.some.call(document.querySelectorAll(".chart"), function (e) {
    return e.textContent.indexOf("could not be drawn") >= 0; });
  var c = charts[0];
  if (c) {
    var u = c.plot, steps = u.data[0];
    var fi = c.roles.indexOf("fired");
    out.firedSteps = fi < 0 ? [] : steps.filter(function (s, i) { return u.data[fi][i] != null; });
    var step = out.firedSteps.length ? out.firedSteps[0] : steps[0];
    var rect = u.over.getBoundingClientRect();
    var x = u.valToPos(step, "x");
    function move(type, px, target) {
      (target || u.over).dispatchEvent(new MouseEvent(type, {clientX: rect.left + px,
        clientY: rect.top + rect.height / 2, bubbles: true, button: 0,
        buttons: type === "mouseup" ? 0 : 1, movementX: type === "mousemove" ? 5 : 0}));
    }
    move("mouseenter", x); move("mousemove", x);
    out.hoverStep = u.cursor.idx == null ? null : steps[u.cursor.idx];
    var tip = c.host.querySelector(".tip");
    out.tip = tip.style.display === "block" ? tip.textContent : "";
    var a = steps[Math.floor(steps.length / 4)], b = steps[Math.floor(3 * steps.length / 4)];
    move("mousedown", u.valToPos(a, "x")); move("mousemove", (u.valToPos(a, "x") + u.valToPos(b, "x")) / 2);
    move("mousemove", u.valToPos(b, "x"));
    move("mouseup", u.valToPos(b, "x"), document);
    out.dragged = [a, b]; out.allSteps = [steps[0], steps[steps.length - 1]];
  }
  setTimeout(function () {  /* uPlot applies a new scale after the event */
    if (c) out.zoom = [c.plot.scales.x.min, c.plot.scales.x.max];
    var pre = document.createElement("pre"); pre.id = "probe";
    pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
  }, 50);
}, 50); });
</script>"""
_PROBED = re.compile(r'<pre id="probe">(.*?)</pre>', re.S)


# Run in the page once it has loaded: what each chart drew (per series its label, role and
# how many values it holds on the plot; the axes' titles and x range) and every caption.
_DRAWN = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = {charts: (window.ruleReportCharts || []).map(function (c) {
    var u = c.plot;
    return {
      series: u.series.slice(1).map(function (s, i) {
        return {label: s.label, role: c.roles[i + 1],
          values: u.data[i + 1].filter(function (v) { return v != null; }).length};
      }),
      axes: [c.spec.xlabel, c.spec.ylabel],
      x: [u.scales.x.min, u.scales.x.max], y: [u.scales.y.min, u.scales.y.max]
    };
  })};
  out.captions = Array.prototype.map.call(document.querySelectorAll("figcaption"),
    function (e) { return e.textContent; });
  out.failed = Array.prototype.some.call(document.querySelectorAll(".chart"), function (e) {
    return e.textContent.indexOf("could not be drawn") >= 0; });
  var pre = document.createElement("pre"); pre.id = "probe";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 50); });
</script>"""


def drawn_charts(binary: str, page: Path, workdir: Path) -> dict[str, object]:
    """What the charts of ``page`` drew in the browser (``_DRAWN``) and its captions."""
    return probe_page(binary, page, workdir, script=_DRAWN)


def probe_page(
    binary: str, page: Path, workdir: Path, *, script: str = _PROBE
) -> dict[str, object]:
    """Open a copy of ``page`` with the probe ``script`` added; what the probe saw (JSON)."""
    import html
    import json

    workdir.mkdir(parents=True, exist_ok=True)
    copy = workdir / "probed.html"
    copy.write_text(
        page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8"
    )
    run = _run(
        binary,
        workdir / "profile-probe",
        "--virtual-time-budget=5000",
        "--dump-dom",
        copy.absolute().as_uri(),
    )
    found = _PROBED.search(run.stdout)
    assert found, f"the probe reported nothing: {run.stderr[-2000:]}"
    data: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return data
