// Throughput: in and out, each on its own chart with a y axis in bytes
// per second and an x axis in time. The agent's samples (every 10 s, the
// last 30 minutes) give the past at once; the page then polls every 2 s.
// Counters, not rates, come from the server, so a late poll cannot skew a
// rate: a rate is the difference of two counters over their spacing.
(function () {
  "use strict";
  var box = document.getElementById("throughput");
  if (!box) return;
  var every = 2000, keepMs = 30 * 60 * 1000;
  var W = 640, H = 150, left = 64, right = 8, top = 8, bottom = 22;
  var ns = "http://www.w3.org/2000/svg";
  var last = null, ins = [], outs = []; // [time_ms, bytes/s]
  function fmt(n) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + u[i];
  }
  function clock(ms) {
    var d = new Date(ms);
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }
  function el(name, attrs, text) {
    var e = document.createElementNS(ns, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function rate(a, b) {
    var s = (b.time_ms - a.time_ms) / 1000;
    return [Math.max(0, b.bytes_in - a.bytes_in) / s, Math.max(0, b.bytes_out - a.bytes_out) / s];
  }
  function push(a, b) {
    if (!(b.time_ms > a.time_ms)) return;
    var r = rate(a, b);
    ins.push([b.time_ms, r[0]]);
    outs.push([b.time_ms, r[1]]);
  }
  function trim(now) {
    while (ins.length && ins[0][0] < now - keepMs) { ins.shift(); outs.shift(); }
  }
  // draw one series: a polyline scaled to its own top, and the axes:
  // 0, half and the top rate on y; the first, middle and last time on x.
  function draw(svg, xs, t0, t1) {
    var peak = 1;
    xs.forEach(function (p) { peak = Math.max(peak, p[1]); });
    var span = Math.max(1, t1 - t0), pw = W - left - right, ph = H - top - bottom;
    function x(t) { return left + ((t - t0) / span) * pw; }
    function y(v) { return top + ph - (v / peak) * ph; }
    svg.querySelector("polyline").setAttribute("points", xs.map(function (p) {
      return x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1);
    }).join(" "));
    var axes = svg.querySelector("g.axes");
    while (axes.firstChild) axes.removeChild(axes.firstChild);
    axes.appendChild(el("line", { x1: left, y1: top, x2: left, y2: top + ph }));
    axes.appendChild(el("line", { x1: left, y1: top + ph, x2: W - right, y2: top + ph }));
    [0, 0.5, 1].forEach(function (f) {
      axes.appendChild(el("text", { "class": "y", x: left - 4, y: y(peak * f) + 3, "text-anchor": "end" }, fmt(peak * f) + "/s"));
    });
    [0, 0.5, 1].forEach(function (f) {
      var anchor = f === 0 ? "start" : f === 1 ? "end" : "middle";
      axes.appendChild(el("text", { "class": "x", x: left + f * pw, y: H - 6, "text-anchor": anchor }, clock(t0 + f * span)));
    });
  }
  function redraw() {
    if (!ins.length) return;
    var t0 = ins[0][0], t1 = ins[ins.length - 1][0];
    draw(document.getElementById("chart-in"), ins, t0, t1);
    draw(document.getElementById("chart-out"), outs, t0, t1);
    document.getElementById("rate-in").textContent = fmt(ins[ins.length - 1][1]);
    document.getElementById("rate-out").textContent = fmt(outs[outs.length - 1][1]);
    box.dataset.points = String(ins.length);
  }
  function poll() {
    fetch(box.dataset.src, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (c) {
      if (last === null) {
        var h = c.history || [];
        for (var i = 1; i < h.length; i++) push(h[i - 1], h[i]);
        last = h.length ? h[h.length - 1] : null;
      }
      if (last) push(last, c);
      last = c;
      trim(c.time_ms);
      redraw();
    }).catch(function () {}).finally(function () { setTimeout(poll, every); });
  }
  poll();
})();
