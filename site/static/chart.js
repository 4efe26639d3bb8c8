/* perffarm series chart: canvas, zoom/pan/hover over up to tens of thousands of points. No dependencies.
   Data arrives through <script src> files calling perffarm.points/commits/samples (works from file://). */
(function () {
  "use strict";
  var pf = window.perffarm = window.perffarm || {};
  var store = { points: {}, samples: {}, commits: {}, waiting: {}, requested: {} };
  pf.points = function (sid, k, d) { (store.points[sid] = store.points[sid] || {})[k] = d; fire("p" + sid + "/" + k); };
  pf.samples = function (sid, k, d) { store.samples[k] = d; fire("s" + k); };
  pf.commits = function (branch, k, rows) { store.commits[k] = rows; fire("c" + k); };

  function fire(key) {
    var cbs = store.waiting[key] || [];
    store.waiting[key] = [];
    cbs.forEach(function (cb) { cb(); });
  }
  function need(key, src, have, cb) {
    if (have()) { cb(); return; }
    (store.waiting[key] = store.waiting[key] || []).push(cb);
    if (store.requested[key]) return;
    store.requested[key] = true;
    var s = document.createElement("script");
    s.src = src;
    s.onerror = function () { store.requested[key] = false; };
    document.head.appendChild(s);
  }

  var COLOURS = { regression: "#c62828", improvement: "#2e7d32", tag: "#6d6d6d", config: "#1565c0", rebase: "#8e24aa", plan: "#ef6c00" };

  function fmt(x) {
    var a = Math.abs(x);
    if (a >= 1000) return Math.round(x).toLocaleString("en-US");
    if (a >= 10) return x.toFixed(1);
    if (a >= 0.01 || a === 0) return x.toFixed(3);
    return x.toPrecision(3);
  }
  /* Round tick values for [a, b]: multiples of 1, 2 or 5 times a power of ten, about `want` of them (so the
     axis reads 950 / 1,000 / 1,050, not 961.8 / 1,069 / 1,123), and the decimals their labels need. */
  function ticks(a, b, want) {
    var raw = (b - a) / want, mag = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / mag;
    var step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag, out = [];
    for (var v = Math.ceil(a / step) * step; v <= b + step * 1e-9; v += step) out.push(Math.round(v / step) * step);
    return { values: out, step: step, decimals: Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) };
  }
  function tickLabel(v, decimals) {
    return v.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
  }
  pf.ticks = ticks;
  function day(ts) { return ts ? new Date(ts * 1000).toISOString().slice(0, 10) : ""; }

  function init() {
    var metaEl = document.getElementById("meta");
    var canvas = document.getElementById("chart");
    if (!metaEl || !canvas) return;
    var meta = JSON.parse(metaEl.textContent);
    var pos = [], med = [], lo = [], hi = [], n = [], flag = [];
    meta.chunks.forEach(function (k) {
      var d = (store.points[meta.sid] || {})[k];
      if (!d) return;
      for (var i = 0; i < d.pos.length; i++) {
        // med/lo/hi are integers over d.scale (a power of ten): master/publish/publisher._fixed
        pos.push(d.pos[i]); med.push(d.med[i] / d.scale); lo.push(d.lo[i] / d.scale); hi.push(d.hi[i] / d.scale);
        n.push(d.n[i]); flag.push(d.flag[i]);
      }
    });
    var N = pos.length;
    var chunk = meta.chunk_size;
    var ctx = canvas.getContext("2d");
    var tip = document.getElementById("tip");
    var ML = 64, MR = 12, MT = 18, MB = 44;  // below the plot: the position (or date) ticks, then the tag names
    var W = 0, H = 0, dpr = window.devicePixelRatio || 1;
    var full0 = N ? pos[0] - 0.5 : 0, full1 = N ? pos[N - 1] + 0.5 : 1;
    var x0 = full0, x1 = full1, hover = -1;

    function size() {
      W = Math.max(320, canvas.parentElement.clientWidth);
      H = 360;
      canvas.width = W * dpr; canvas.height = H * dpr;
      canvas.style.width = W + "px"; canvas.style.height = H + "px";
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    }
    function bsearch(x) { var a = 0, b = N; while (a < b) { var m = (a + b) >> 1; if (pos[m] < x) a = m + 1; else b = m; } return a; }
    function sx(p) { return ML + (p - x0) / (x1 - x0) * (W - ML - MR); }
    function px(cx) { return x0 + (cx - ML) / (W - ML - MR) * (x1 - x0); }
    // overlays (meta.overlays: the same workload on other machines, branches, recipe versions, or a paired
    // workload's reference): drawn when their box is ticked, their chunks loaded then; ?overlay=<sid>,<sid>
    var PALETTE = ["#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#1b9e77", "#666666"];
    var overlays = (meta.overlays || []).map(function (m, i) {
      return { sid: m.sid, label: m.label, chunks: m.chunks, colour: PALETTE[i % PALETTE.length], on: false, loaded: false,
               pos: [], med: [], from: function (x) { var a = 0, b = this.pos.length; while (a < b) { var c = (a + b) >> 1; if (this.pos[c] < x - 1) a = c + 1; else b = c; } return a; } };
    });
    function shown() { return overlays.filter(function (o) { return o.on && o.loaded; }); }
    function loadOverlay(o) {
      if (o.loaded || o.loading || !o.chunks.length) return;
      o.loading = true;
      var ks = [], left = 0;
      for (var k = o.chunks[0]; k <= o.chunks[1]; k++) ks.push(k);
      left = ks.length;
      ks.forEach(function (k) {
        need("p" + o.sid + "/" + k, "../data/series/" + encodeURIComponent(o.sid) + "/" + k + ".js",
          function () { return !!(store.points[o.sid] && store.points[o.sid][k]); },
          function () {
            if (--left) return;
            ks.forEach(function (kk) {
              var d = store.points[o.sid][kk];
              for (var i = 0; i < d.pos.length; i++) { o.pos.push(d.pos[i]); o.med.push(d.med[i] / d.scale); }
            });
            o.loaded = true; draw(); legendReady();
          });
      });
    }
    function legendReady() {
      var box = document.getElementById("overlays");
      if (box) box.dataset.shown = overlays.filter(function (o) { return o.on && o.loaded; }).map(function (o) { return o.sid; }).join(",");
    }
    var y0 = 0, y1 = 1, yTicks = null, xLabels = [], tagLabels = [], axis = "position", pending = false;
    function redrawSoon() { if (!pending) { pending = true; setTimeout(function () { pending = false; draw(); }, 0); } }
    function sy(v) { return MT + (1 - (v - y0) / (y1 - y0)) * (H - MT - MB); }

    function draw() {
      ctx.clearRect(0, 0, W, H);
      ctx.font = "11px system-ui, sans-serif";
      var a = bsearch(x0), b = bsearch(x1 + 1e-9);
      if (a > 0) a--;
      if (b < N) b++;
      y0 = Infinity; y1 = -Infinity;
      for (var i = a; i < b; i++) { if (lo[i] < y0) y0 = lo[i]; if (hi[i] > y1) y1 = hi[i]; }
      shown().forEach(function (o) {  // an overlaid series' medians in view count too
        for (var j = o.from(x0); j < o.pos.length && o.pos[j] <= x1 + 1; j++) { if (o.med[j] < y0) y0 = o.med[j]; if (o.med[j] > y1) y1 = o.med[j]; }
      });
      if (!isFinite(y0)) { y0 = 0; y1 = 1; }
      var pad = (y1 - y0) * 0.08 || Math.abs(y1) * 0.05 || 1;
      y0 -= pad; y1 += pad;
      // axes and grid
      ctx.strokeStyle = "#e3e3e3"; ctx.fillStyle = "#555"; ctx.lineWidth = 1;
      yTicks = ticks(y0, y1, 5);
      yTicks.values.forEach(function (v) {
        var yy = Math.round(sy(v)) + 0.5;
        ctx.beginPath(); ctx.moveTo(ML, yy); ctx.lineTo(W - MR, yy); ctx.stroke();
        ctx.textAlign = "right"; ctx.fillText(tickLabel(v, yTicks.decimals), ML - 4, yy + 4);
      });
      ctx.textAlign = "center";
      var xt = ticks(x0, x1, 6);  // branch positions: whole numbers only
      xLabels = [];
      xt.values.forEach(function (p) {
        if (p !== Math.round(p)) return;
        var text = String(p);
        if (axis === "date") {  // the commit's date at that position, once its commit facts are loaded
          var k = Math.floor(p / chunk), row = store.commits[k] && store.commits[k][p - k * chunk];
          if (row) text = day(row[3]);
          else { text = ""; commitAt(p, redrawSoon); }
        }
        if (text) { ctx.fillText(text, sx(p), H - MB + 14); xLabels.push(text); }
      });
      // the tags in view, named on the axis below the ticks (left to right; a name that would overlap the one
      // before it is left out, its tick and dashed line stay)
      tagLabels = [];
      ctx.textAlign = "left"; ctx.fillStyle = COLOURS.tag; ctx.strokeStyle = COLOURS.tag;
      var room = ML - 4;
      meta.markers.forEach(function (m) {
        if (m.kind !== "tag" || m.pos < x0 || m.pos > x1) return;
        var xx = Math.round(sx(m.pos)) + 0.5, wide = ctx.measureText(m.label).width;
        ctx.beginPath(); ctx.moveTo(xx, H - MB); ctx.lineTo(xx, H - MB + 4); ctx.stroke();
        var at = Math.min(Math.max(xx - wide / 2, ML - 4), W - MR - wide);
        if (at < room) return;
        ctx.fillText(m.label, at, H - 6); tagLabels.push(m.label); room = at + wide + 8;
      });
      ctx.save();
      ctx.beginPath(); ctx.rect(ML, MT, W - ML - MR, H - MT - MB); ctx.clip();
      // markers
      meta.markers.forEach(function (m) {
        if (m.pos < x0 || m.pos > x1) return;
        var xx = Math.round(sx(m.pos)) + 0.5;
        ctx.strokeStyle = COLOURS[m.kind] || "#999";
        ctx.setLineDash(m.kind === "tag" ? [2, 3] : m.kind === "rebase" ? [1, 2] : m.kind === "plan" ? [3, 2] : [6, 3]);
        ctx.beginPath(); ctx.moveTo(xx, MT); ctx.lineTo(xx, H - MB); ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = COLOURS[m.kind] || "#999"; ctx.textAlign = "left";
        if (m.kind !== "tag") ctx.fillText(m.label, xx + 3, MT + 10);  // a tag is named on the axis
      });
      // spread: one vertical bar per pixel column (min of lo, max of hi) keeps 10,000 points cheap
      ctx.strokeStyle = "rgba(33,102,172,0.28)";
      ctx.beginPath();
      var col = -1, cmin = 0, cmax = 0;
      for (i = a; i < b; i++) {
        var c = Math.round(sx(pos[i]));
        if (c !== col) {
          if (col >= 0) { ctx.moveTo(col + 0.5, sy(cmin)); ctx.lineTo(col + 0.5, sy(cmax)); }
          col = c; cmin = lo[i]; cmax = hi[i];
        } else { if (lo[i] < cmin) cmin = lo[i]; if (hi[i] > cmax) cmax = hi[i]; }
      }
      if (col >= 0) { ctx.moveTo(col + 0.5, sy(cmin)); ctx.lineTo(col + 0.5, sy(cmax) - 0.5); }
      ctx.stroke();
      // median line
      ctx.strokeStyle = "#2166ac"; ctx.lineWidth = 1.5;
      ctx.beginPath();
      for (i = a; i < b; i++) { if (i === a) ctx.moveTo(sx(pos[i]), sy(med[i])); else ctx.lineTo(sx(pos[i]), sy(med[i])); }
      ctx.stroke();
      if (b - a <= (W - ML - MR) / 4) {
        ctx.fillStyle = "#2166ac";
        for (i = a; i < b; i++) { ctx.beginPath(); ctx.arc(sx(pos[i]), sy(med[i]), 2.2, 0, 6.3); ctx.fill(); }
      }
      shown().forEach(function (o) {  // overlays: their median lines, under the hover ring
        ctx.strokeStyle = o.colour; ctx.lineWidth = 1.5; ctx.beginPath();
        for (var j = o.from(x0), first = true; j < o.pos.length && o.pos[j] <= x1 + 1; j++) {
          if (first) { ctx.moveTo(sx(o.pos[j]), sy(o.med[j])); first = false; } else ctx.lineTo(sx(o.pos[j]), sy(o.med[j]));
        }
        ctx.stroke();
      });
      if (hover >= 0) {
        ctx.strokeStyle = "#000"; ctx.lineWidth = 1;
        ctx.beginPath(); ctx.arc(sx(pos[hover]), sy(med[hover]), 4.5, 0, 6.3); ctx.stroke();
      }
      ctx.restore();
      canvas.dataset.ready = "1";
      canvas.dataset.visible = String(b - a);
    }

    function commitAt(p, cb) {
      var k = Math.floor(p / chunk);
      need("c" + k, "../data/branches/" + encodeURIComponent(meta.branch_dir) + "/" + k + ".js",
        function () { return !!store.commits[k]; },
        function () { cb(store.commits[k][p - k * chunk] || null); });
    }

    function line(text, cls) { var d = document.createElement("div"); if (cls) d.className = cls; d.textContent = text; return d; }
    function showTip(i, cx, cy) {
      hover = i; draw();
      tip.hidden = false;
      tip.replaceChildren(line("position " + pos[i] + " · loading commit…", "tip-sha"));
      var fl = (flag[i] & 1 ? " · noisy host" : "") + (flag[i] & 2 ? " · SLA miss" : "");
      var val = line(fmt(med[i]) + " " + meta.unit + " (median of " + n[i] + "; spread " + fmt(lo[i]) + "–" + fmt(hi[i]) + ")" + fl, "tip-val");
      tip.appendChild(val);
      tip.style.left = Math.min(cx + 14, W - 300) + "px";
      tip.style.top = Math.max(cy - 10, 0) + "px";
      commitAt(pos[i], function (c) {
        if (hover !== i) return;
        tip.replaceChildren();
        if (c) {
          tip.appendChild(line(c[0].slice(0, 12), "tip-sha"));
          tip.appendChild(line(c[1], "tip-subject"));
          tip.appendChild(line(c[2] + " · " + day(c[3]), "tip-author"));
        }
        tip.appendChild(val);
      });
    }

    canvas.addEventListener("mousemove", function (e) {
      var r = canvas.getBoundingClientRect(), cx = e.clientX - r.left, cy = e.clientY - r.top;
      if (drag) {
        var dp = (drag.x - cx) / (W - ML - MR) * (drag.x1 - drag.x0);
        setView(drag.x0 + dp, drag.x1 + dp); return;
      }
      if (!N || cx < ML || cx > W - MR) return;
      var p = px(cx), j = bsearch(p);
      if (j >= N || (j > 0 && p - pos[j - 1] < pos[j] - p)) j--;
      if (j < 0) return;
      if (Math.abs(sx(pos[j]) - cx) > 30) { tip.hidden = true; hover = -1; draw(); return; }
      if (j !== hover) showTip(j, cx, cy);
    });
    canvas.addEventListener("mouseleave", function () { tip.hidden = true; hover = -1; drag = null; draw(); });
    var drag = null;
    canvas.addEventListener("mousedown", function (e) { var r = canvas.getBoundingClientRect(); drag = { x: e.clientX - r.left, x0: x0, x1: x1 }; });
    // a click on a point (not the end of a drag) opens the compare page: that commit against the series' previous
    // measured commit, the pair its rQPS vs previous is made of
    canvas.addEventListener("click", function () {
      if (hover < 1 || x0 !== clickView[0] || x1 !== clickView[1]) return;
      var i = hover;
      commitAt(pos[i - 1], function (b) {
        commitAt(pos[i], function (c) {
          if (b && c) location.href = "../compare.html?base=" + encodeURIComponent(b[0]) + "&new=" + encodeURIComponent(c[0]);
        });
      });
    });
    var clickView = [x0, x1];
    canvas.addEventListener("mousedown", function () { clickView = [x0, x1]; });
    window.addEventListener("mouseup", function () { drag = null; });
    function setView(a, b) {
      var span = Math.min(Math.max(b - a, 4), full1 - full0);
      if (a < full0) a = full0;
      if (a + span > full1) a = full1 - span;
      x0 = a; x1 = a + span; draw(); remember();
    }
    // the zoom is in the address (?from=&to=, branch positions), so a zoomed chart is a link; written once the
    // view rests (a wheel turn is many steps, and browsers throttle history updates)
    var urlTimer = null;
    function remember() {
      clearTimeout(urlTimer);
      urlTimer = setTimeout(function () {
        var p = new URLSearchParams(location.search);
        if (axis === "date") p.set("axis", "date"); else p.delete("axis");
        var on = overlays.filter(function (o) { return o.on; }).map(function (o) { return o.sid; });
        if (on.length) p.set("overlay", on.join(",")); else p.delete("overlay");
        if (x0 <= full0 && x1 >= full1) { p.delete("from"); p.delete("to"); }
        else { p.set("from", String(Math.round(x0 * 100) / 100)); p.set("to", String(Math.round(x1 * 100) / 100)); }
        var q = p.toString();
        history.replaceState(null, "", q ? "?" + q : location.pathname);
        canvas.dataset.url = q;
      }, 150);
    }
    function zoom(f, at) { setView(at - (at - x0) * f, at + (x1 - at) * f); }
    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = canvas.getBoundingClientRect();
      zoom(e.deltaY > 0 ? 1.25 : 0.8, px(e.clientX - r.left));
    }, { passive: false });
    canvas.addEventListener("dblclick", function () { setView(full0, full1); });
    // keyboard: + and - zoom, the arrows pan a tenth of the view, 0 or Home shows everything
    canvas.tabIndex = 0;
    canvas.addEventListener("keydown", function (e) {
      var span = x1 - x0, mid = (x0 + x1) / 2;
      if (e.key === "+" || e.key === "=") zoom(0.5, mid);
      else if (e.key === "-") zoom(2, mid);
      else if (e.key === "ArrowLeft") setView(x0 - span / 10, x1 - span / 10);
      else if (e.key === "ArrowRight") setView(x0 + span / 10, x1 + span / 10);
      else if (e.key === "0" || e.key === "Home") setView(full0, full1);
      else return;
      e.preventDefault();
    });
    document.querySelectorAll("[data-zoom]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var k = btn.getAttribute("data-zoom"), mid = (x0 + x1) / 2;
        if (k === "in") zoom(0.5, mid); else if (k === "out") zoom(2, mid); else setView(full0, full1);
      });
    });
    window.addEventListener("resize", function () { size(); draw(); });

    // the table of points, newest first, a page at a time
    var PAGE = 50, page = 0, tbody = document.querySelector("#points tbody"), pager = document.getElementById("pager");
    function td(text, cls) { var c = document.createElement("td"); if (cls) c.className = cls; c.textContent = text; return c; }
    function renderPage() {
      tbody.replaceChildren();
      var start = N - 1 - page * PAGE, end = Math.max(start - PAGE, -1);
      for (var i = start; i > end; i--) (function (i) {
        var tr = document.createElement("tr");
        tr.appendChild(td(String(pos[i]), "num"));
        var shaCell = td(""), subj = td("");
        tr.appendChild(shaCell); tr.appendChild(subj);
        tr.appendChild(td(fmt(med[i]), "num"));
        tr.appendChild(td(fmt(lo[i]) + "–" + fmt(hi[i]), "num"));
        tr.appendChild(td(String(n[i]), "num"));
        var b = document.createElement("button"); b.type = "button"; b.textContent = "Samples";
        var bc = document.createElement("td"); bc.appendChild(b); tr.appendChild(bc);
        b.addEventListener("click", function () { showSamples(i, tr, b); });
        tbody.appendChild(tr);
        commitAt(pos[i], function (c) {
          if (!c) return;
          var a = document.createElement("a"); a.href = "../commit.html?c=" + encodeURIComponent(c[0]);
          a.className = "sha"; a.textContent = c[0].slice(0, 12); shaCell.appendChild(a);
          subj.textContent = c[1];
        });
      })(i);
      pager.replaceChildren();
      var pages = Math.ceil(N / PAGE);
      var prev = document.createElement("button"); prev.type = "button"; prev.textContent = "‹ newer"; prev.disabled = page === 0;
      var next = document.createElement("button"); next.type = "button"; next.textContent = "older ›"; next.disabled = page >= pages - 1;
      prev.onclick = function () { page--; renderPage(); }; next.onclick = function () { page++; renderPage(); };
      pager.appendChild(prev); pager.appendChild(document.createTextNode(" page " + (page + 1) + " of " + Math.max(pages, 1) + " ")); pager.appendChild(next);
    }
    function showSamples(i, tr, btn) {
      var k = Math.floor(pos[i] / chunk);
      need("s" + k, "../data/series/" + encodeURIComponent(meta.sid) + "/" + k + ".samples.js",
        function () { return !!store.samples[k]; },
        function () {
          var d = store.samples[k], j = d.position.indexOf(pos[i]);  // {position: [...], samples: [[...], ...]}
          var row = document.createElement("tr"), c = td(j < 0 ? "" : d.samples[j].map(fmt).join(", "), "samples");
          c.colSpan = 7; row.appendChild(c); tr.after(row); btn.disabled = true;
        });
    }
    pf.chart = { clientXOf: function (p) { return canvas.getBoundingClientRect().left + sx(p); },
                 clientYOf: function (i) { return canvas.getBoundingClientRect().top + sy(med[i]); },
                 positions: pos, medians: med, setView: setView,
                 yTicks: function () { return yTicks.values.slice(); },
                 view: function () { return [x0, x1]; }, xLabels: function () { return xLabels.slice(); },
                 tagLabels: function () { return tagLabels.slice(); },
                 overlays: function () { return shown().map(function (o) { return { sid: o.sid, colour: o.colour, positions: o.pos.slice(), medians: o.med.slice() }; }); } };
    // the x axis: branch positions, or the commits' dates at those positions (?axis=date)
    var axisBtn = document.querySelector("[data-axis]");
    function showAxis() { if (axisBtn) axisBtn.textContent = axis === "date" ? "Positions on the axis" : "Dates on the axis"; }
    if (axisBtn) axisBtn.addEventListener("click", function () { axis = axis === "date" ? "position" : "date"; showAxis(); draw(); remember(); });
    size();
    var asked = new URLSearchParams(location.search);
    if (asked.get("axis") === "date") axis = "date";
    showAxis();
    var wanted = (asked.get("overlay") || "").split(",");
    document.querySelectorAll("[data-overlay]").forEach(function (box) {
      var o = overlays.filter(function (x) { return x.sid === box.getAttribute("data-overlay"); })[0];
      if (!o) return;
      box.nextElementSibling.style.background = o.colour;
      box.checked = o.on = wanted.indexOf(o.sid) >= 0 && o.chunks.length > 0;
      if (o.on) loadOverlay(o);
      box.addEventListener("change", function () { o.on = box.checked; if (o.on) loadOverlay(o); draw(); legendReady(); remember(); });
    });
    legendReady();
    var from = parseFloat(asked.get("from")), to = parseFloat(asked.get("to"));
    if (isFinite(from) && isFinite(to) && to > from) { x0 = Math.max(full0, from); x1 = Math.min(full1, to); }
    draw(); renderPage();
    // for tests and tests/benchmarks/site_figures.py: when the chart and table became usable (ms since navigation)
    canvas.dataset.interactiveMs = String(Math.round(performance.now()));
  }
  document.addEventListener("DOMContentLoaded", init);
})();
