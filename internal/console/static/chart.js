// Live throughput: polls the agent's byte counters every 2 s and draws
// the rates of up to the last two minutes as an SVG sparkline. Counters, not
// rates, come from the server, so a late poll cannot skew a rate.
(function () {
  "use strict";
  var box = document.getElementById("throughput");
  if (!box) return;
  var every = 2000, keep = 60, w = 600, h = 120;
  var last = null, ins = [], outs = [];
  function fmt(n) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + u[i];
  }
  // The history so far spans the width; it holds at most keep polls.
  function points(xs, top) {
    var step = w / Math.max(1, xs.length - 1);
    return xs.map(function (v, i) {
      return (i * step).toFixed(1) + "," + (h - 4 - (v / top) * (h - 8)).toFixed(1);
    }).join(" ");
  }
  function draw() {
    var top = Math.max(1, Math.max.apply(null, ins.concat(outs)));
    document.getElementById("line-in").setAttribute("points", points(ins, top));
    document.getElementById("line-out").setAttribute("points", points(outs, top));
    if (ins.length) {
      document.getElementById("rate-in").textContent = fmt(ins[ins.length - 1]);
      document.getElementById("rate-out").textContent = fmt(outs[outs.length - 1]);
    }
  }
  function poll() {
    fetch(box.dataset.src, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (c) {
      if (last && c.time_ms > last.time_ms) {
        var s = (c.time_ms - last.time_ms) / 1000;
        ins.push(Math.max(0, c.bytes_in - last.bytes_in) / s);
        outs.push(Math.max(0, c.bytes_out - last.bytes_out) / s);
        if (ins.length > keep) { ins.shift(); outs.shift(); }
        draw();
      }
      last = c;
    }).catch(function () {}).finally(function () { setTimeout(poll, every); });
  }
  poll();
})();
