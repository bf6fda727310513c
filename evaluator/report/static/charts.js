/* The rule report's charts: each <script type="application/json" class="chart-spec"> in
   the page becomes an interactive uPlot chart in the element before it (hover: step and
   values; drag: zoom on a range of steps; double-click: all steps). Our own code, written
   for this report; uPlot (MIT) is inlined before it. Nothing is fetched. */
(function () {
  "use strict";
  var FIRED = "#b3261e", THRESHOLD = "#444b52";
  var charts = (window.ruleReportCharts = []);

  function num(v) {
    if (typeof v === "number") return isFinite(v) ? v : null;
    return null; /* "NaN", "Infinity", "-Infinity", null */
  }

  function fmt(v) {
    if (v == null) return "";
    if (!isFinite(v)) return String(v);
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= 1e5 || a < 1e-3) return v.toExponential(2).replace(/\.?0+e/, "e");
    return String(parseFloat(v.toPrecision(4)));
  }

  /* log axis ticks: powers of ten only, at most 8 of them */
  function decades(u, axis, min, max) {
    var lo = Math.floor(Math.log10(min)), hi = Math.ceil(Math.log10(max)), out = [];
    var every = Math.max(1, Math.ceil((hi - lo + 1) / 8));
    for (var e = lo; e <= hi; e += every) {
      var v = Math.pow(10, e);
      if (v >= min * 0.999 && v <= max * 1.001) out.push(v);
    }
    return out.length ? out : [min, max];
  }

  function build(host, spec) {
    var xs = {}, lines = spec.lines || [];
    lines.forEach(function (l) { l.points.forEach(function (p) { xs[p[0]] = 1; }); });
    /* the steps the axis covers (the run's): a quantity tested at one step is drawn over it */
    (spec.span || []).forEach(function (s) { xs[s] = 1; });
    var steps = Object.keys(xs).map(Number).sort(function (a, b) { return a - b; });
    var at = {};
    steps.forEach(function (s, i) { at[s] = i; });
    function column(points) {
      var col = new Array(steps.length).fill(null);
      points.forEach(function (p) { if (p[0] in at) col[at[p[0]]] = num(p[1]); });
      return col;
    }
    var data = [steps], series = [{ label: "step" }], finite = [], roles = [null];
    lines.forEach(function (l) {
      var col = column(l.points);
      col.forEach(function (v) { if (v != null && (!spec.log || v > 0)) finite.push(v); });
      if (spec.log) col = col.map(function (v) { return v != null && v > 0 ? v : null; });
      data.push(col);
      roles.push(l.grey ? "grey" : l.dots ? "read" : "line");
      if (l.dots) /* what the rule read: hollow dots on its line */
        series.push({ label: l.label, stroke: l.color, width: 0, paths: function () { return null; },
          points: { show: true, space: 0, size: 6, width: 1.5, fill: "#fff" } });
      else
        series.push({ label: l.label, stroke: l.color, width: l.width || 1.6, spanGaps: true,
          points: { show: steps.length <= 60, size: 4, fill: l.color } });
    });
    var lo = Math.min.apply(null, finite.length ? finite : [0]);
    var hi = Math.max.apply(null, finite.length ? finite : [1]);
    if (spec.threshold) {
      var t = spec.threshold, col = new Array(steps.length).fill(null), pts = t.points.slice();
      pts.sort(function (a, b) { return a[0] - b[0]; });
      var k = 0, cur = num(pts[0][1]);
      steps.forEach(function (s, i) {
        while (k < pts.length && pts[k][0] <= s) { cur = num(pts[k][1]); k++; }
        col[i] = cur;
      });
      col.forEach(function (v) { if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
      data.push(col);
      roles.push("threshold");
      series.push({ label: t.label, stroke: THRESHOLD, width: 1.2, dash: [6, 4],
        points: { show: false } });
    }
    function marks(points, label, style) {
      var col = new Array(steps.length).fill(null);
      points.forEach(function (p) {
        if (!(p[0] in at)) return;
        var v = num(p[1]);
        col[at[p[0]]] = v == null ? (String(p[1]).charAt(0) === "-" ? lo : hi) : v;
      });
      data.push(col);
      roles.push(label);
      series.push({ label: label, stroke: FIRED, width: 0, paths: function () { return null; },
        points: Object.assign({ show: true, space: 0 }, style) });
    }
    if (spec.fired && spec.fired.length)
      marks(spec.fired, "fired", { size: 10, fill: FIRED, stroke: "#fff", width: 1 });
    if (spec.closest)
      marks([spec.closest], "closest", { size: 16, fill: "rgba(0,0,0,0)", stroke: FIRED, width: 2 });

    if (spec.zero) { lo = Math.min(lo, 0); hi = Math.max(hi, 0); } /* zero in sight */
    var flat = hi - lo <= Math.abs(hi) * 1e-12;
    var tip = document.createElement("div");
    tip.className = "tip";
    host.appendChild(tip);
    var opts = {
      width: Math.max(320, host.clientWidth || 860),
      height: spec.height || 280,
      legend: { show: false },
      cursor: { drag: { x: true, y: false }, points: { size: 7 } },
      scales: {
        x: { time: false },
        y: {
          distr: spec.log ? 3 : 1,
          range: flat ? function () {
            var d = hi === 0 ? 1 : Math.abs(hi) * 0.5;
            return spec.log ? [hi / 10, hi * 10] : [hi - d, hi + d];
          } : spec.zero ? function () {
            var pad = (hi - lo) * 0.06;
            return [lo < 0 ? lo - pad : 0, hi > 0 ? hi + pad : 0];
          } : undefined,
        },
      },
      axes: [
        { label: spec.xlabel || "step", stroke: "#5f6b76",
          incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 1e4, 2e4, 5e4, 1e5, 1e6],
          values: function (u, vals) { return vals.map(function (v) { return String(v); }); } },
        { label: spec.ylabel || "", stroke: "#5f6b76", size: 76,
          splits: spec.log ? decades : undefined,
          values: function (u, vals) {
            if (spec.log) return vals.map(fmt);
            var span = Math.abs(vals[vals.length - 1] - vals[0]) || 1;
            /* a tick at float noise around zero reads 0, never 1e-17 */
            return vals.map(function (v) { return Math.abs(v) < span * 1e-9 ? "0" : fmt(v); });
          } },
      ],
      series: series,
      hooks: { setCursor: [function (u) { show(u); }] },
    };
    function show(u) {
      var i = u.cursor.idx;
      if (i == null) { tip.style.display = "none"; return; }
      var rows = ["step " + u.data[0][i]];
      for (var s = 1; s < u.series.length; s++) {
        var v = u.data[s][i], ser = u.series[s];
        if (v == null) continue;
        if (roles[s] === "fired") rows.push("fired here");
        else if (roles[s] === "closest") rows.push("closest approach");
        else if (roles[s] === "read") rows.push("read by the rule");
        else if (roles[s] !== "grey") rows.push(ser.label + ": " + fmt(v));
      }
      tip.textContent = rows.join("\n");
      tip.style.display = "block";
      var left = u.cursor.left + 14, top = u.cursor.top + 10;
      if (left > u.over.clientWidth - 220) left = u.cursor.left - 230;
      tip.style.left = left + u.over.offsetLeft + "px";
      tip.style.top = top + u.over.offsetTop + "px";
    }
    var plot = new uPlot(opts, data, host);
    charts.push({ plot: plot, spec: spec, host: host, roles: roles });
  }

  function all() {
    var specs = document.querySelectorAll("script.chart-spec");
    for (var i = 0; i < specs.length; i++) {
      var host = specs[i].previousElementSibling;
      try {
        build(host, JSON.parse(specs[i].textContent));
      } catch (e) {
        host.textContent = "This chart could not be drawn: " + e;
      }
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all);
  else all();
})();
