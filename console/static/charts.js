// Charts: draw the range's data, which the page carries as JSON, with uPlot.
(function () {
  "use strict";
  var box = document.getElementById("charts");
  if (!box || !window.uPlot) return;
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  var fg = dark ? "#e6edf3" : "#1b1f24";
  var grid = dark ? "#30363d" : "#d0d7de";
  var colors = ["#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989"];
  function axes() {
    return [
      { stroke: fg, grid: { stroke: grid } },
      { stroke: fg, grid: { stroke: grid } }
    ];
  }
  function width(el) { return Math.max(260, el.clientWidth - 4); }
  var plots = [];
  function draw(id, series, data) {
    var el = document.getElementById(id);
    var p = new uPlot({ width: width(el), height: 220, series: series, axes: axes(), scales: { x: { time: true } } }, data, el);
    plots.push([p, el]);
  }
  // The series come with the page (data-chart), computed with its table
  // in one pass over the log.
  try {
    var d = JSON.parse(box.dataset.chart);
    draw("chart-rate", [{}, { label: "calls/min", stroke: colors[0], fill: "rgba(9,105,218,0.1)" }], [d.times, d.per_minute]);
    draw("chart-errors", [{}, { label: "error %", stroke: colors[1], spanGaps: false, points: { show: true } }], [d.times, d.error_rate]);
    ["p50", "p99"].forEach(function (k) {
      var series = [{}], data = [d.times];
      (d.tools || []).forEach(function (t, i) {
        series.push({ label: t, stroke: colors[i % colors.length], spanGaps: true, points: { show: true } });
        data.push(d[k][i]);
      });
      if (series.length === 1) { series.push({ label: "no calls", stroke: grid }); data.push(d.times.map(function () { return null; })); }
      draw("chart-" + k, series, data);
    });
    box.dataset.ready = "1";
  } catch (e) {
    box.dataset.error = String(e);
  }
  window.addEventListener("resize", function () {
    plots.forEach(function (pe) { pe[0].setSize({ width: width(pe[1]), height: 220 }); });
  });
})();
