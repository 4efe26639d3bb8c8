/* Compare two commits or tags from the published per-commit data: per series the ratio median(new) / median(base),
   its exact-bootstrap 95% CI and a verdict (docs/site.md#compare); sort, filter and group; the state in the URL.
   Untrusted text (labels, refs) only ever goes through textContent. */
(function () {
  "use strict";
  var pf = window.perffarm = window.perffarm || {};
  var refs = null, commits = {}, waiting = {};
  pf.refs = function (d) { refs = d; };
  pf.commit = function (sha, d) {
    // rows: [sid, median, n, ratio, ci_low, ci_high, colour, base, flags, samples] (master/publish/commits.py);
    // samples is null for a point of more samples than the data carry
    var by = {};
    d.rows.forEach(function (r) { by[r[0]] = { median: r[1], n: r[2], samples: r.length > 9 ? r[9] : null }; });
    commits[sha] = by; (waiting[sha] || []).forEach(function (cb) { cb(); }); waiting[sha] = [];
  };

  // ---------------------------------------------------------------- statistics (the farm's, master/detect/rqps.py)
  function comb(n, k) { var c = 1; for (var i = 0; i < k; i++) c = c * (n - i) / (i + 1); return c; }
  function binomSf(m, n, p) {  // P(Bin(n, p) >= m), summed as rqps._binom_sf does
    var t = 0;
    for (var k = m; k <= n; k++) t += comb(n, k) * Math.pow(p, k) * Math.pow(1 - p, n - k);
    return t;
  }
  var supports = {};
  /* The exact bootstrap distribution of the median of n resampled values: the resampled median is
     (x_(i) + x_(j)) / 2 with probability p (rqps._median_support, which derives it). */
  function support(n) {
    if (supports[n]) return supports[n];
    var I = [], J = [], P = [], k;
    if (n % 2) {
      var m = (n + 1) / 2;
      for (k = 1; k <= n; k++) { I.push(k - 1); J.push(k - 1); P.push(Math.max(0, binomSf(m, n, k / n) - binomSf(m, n, (k - 1) / n))); }
    } else {
      var a = n / 2, c = comb(n, a), pa = [], low = [], high = [];
      for (k = 1; k <= n; k++) {
        pa.push(binomSf(a, n, k / n) - binomSf(a, n, (k - 1) / n));
        low.push(Math.pow(k / n, a) - Math.pow((k - 1) / n, a));
        high.push(Math.pow((n - k + 1) / n, n - a) - Math.pow((n - k) / n, n - a));
      }
      for (var i = 1; i <= n; i++) {
        var off = [], sum = 0, j;
        for (j = i + 1; j <= n; j++) off.push(c * low[i - 1] * high[j - 1]);
        for (j = 0; j < off.length; j++) sum += off[j];
        I.push(i - 1); J.push(i - 1); P.push(Math.max(0, pa[i - 1] - sum));
        for (j = i + 1; j <= n; j++) { I.push(i - 1); J.push(j - 1); P.push(Math.max(0, off[j - i - 1])); }
      }
    }
    return (supports[n] = { i: I, j: J, p: P });
  }
  function median(sorted) { var n = sorted.length, h = n >> 1; return n % 2 ? sorted[h] : (sorted[h - 1] + sorted[h]) / 2; }
  function asc(a, b) { return a - b; }
  /* median(new) / median(base), the percentile bounds of its exact bootstrap distribution (rqps.median_ratio_block)
     and the two-sided bootstrap p-value of "no change", 2 min(P(r* <= 1), P(r* >= 1)). null: no ratio; low, high
     and p null: a side has fewer than 2 samples. */
  function ratioEstimate(base, neu, confidence) {
    var B = base.slice().sort(asc), X = neu.slice().sort(asc);
    var mb = median(B), mx = median(X), r = mb > 0 && mx >= 0 ? mx / mb : NaN;
    if (!isFinite(r)) return null;
    var out = { ratio: r, low: null, high: null, p: null };
    if (B.length < 2 || X.length < 2) return out;
    var bs = support(B.length), xs = support(X.length), nb = bs.p.length, nx = xs.p.length;
    var medB = new Float64Array(nb), medX = new Float64Array(nx), k, a;
    for (k = 0; k < nb; k++) medB[k] = (B[bs.i[k]] + B[bs.j[k]]) / 2;
    for (a = 0; a < nx; a++) medX[a] = (X[xs.i[a]] + X[xs.j[a]]) / 2;
    var size = nb * nx, rs = new Float64Array(size), ws = new Float64Array(size), idx = new Uint32Array(size);
    for (a = 0; a < nx; a++) for (k = 0; k < nb; k++) { var q = a * nb + k; rs[q] = medX[a] / medB[k]; ws[q] = xs.p[a] * bs.p[k]; idx[q] = q; }
    idx.sort(function (u, v) { return rs[u] - rs[v]; });
    var tail = (1 - confidence) / 2, total = 0, below = 0, above = 0;
    for (q = 0; q < size; q++) { total += ws[idx[q]]; if (rs[q] <= 1) below += ws[q]; if (rs[q] >= 1) above += ws[q]; }
    var cw = 0, lo = null, hi = null;
    for (q = 0; q < size && hi === null; q++) {
      cw += ws[idx[q]];
      if (lo === null && cw / total >= tail - 1e-12) lo = rs[idx[q]];
      if (cw / total >= 1 - tail - 1e-12) hi = rs[idx[q]];
    }
    if (!isFinite(lo) || !isFinite(hi)) return out;
    out.low = lo; out.high = hi; out.p = Math.min(1, 2 * Math.min(below, above) / total);
    return out;
  }
  /* Benjamini & Hochberg's step-up procedure at FDR q (master/detect/fdr.benjamini_hochberg): the discoveries. */
  function discoveries(ps, q) {
    var order = ps.map(function (_, i) { return i; }).sort(function (u, v) { return ps[u] - ps[v] || u - v; });
    var last = -1, m = ps.length, keep = ps.map(function () { return false; });
    order.forEach(function (i, k) { if (ps[i] <= q * (k + 1) / m) last = k; });
    for (var k = 0; k <= last; k++) keep[order[k]] = true;
    return keep;
  }
  pf.stats = { support: support, ratioEstimate: ratioEstimate, discoveries: discoveries };

  // ---------------------------------------------------------------- data
  function load(sha, ok, fail) {
    if (commits[sha]) { ok(); return; }
    (waiting[sha] = waiting[sha] || []).push(ok);
    var s = document.createElement("script");
    s.src = "data/commits/" + encodeURIComponent(sha) + ".js";
    s.onerror = function () { waiting[sha] = []; fail(); };
    document.head.appendChild(s);
  }
  function resolve(text) {
    text = text.trim();
    if (Object.prototype.hasOwnProperty.call(refs.tags, text)) return refs.tags[text];
    var low = text.toLowerCase();
    if (/^[0-9a-f]{40}$/.test(low)) return low;
    if (/^[0-9a-f]{4,39}$/.test(low)) {
      var all = refs.recent.concat(Object.keys(refs.tags).map(function (t) { return refs.tags[t]; }));
      var hits = all.filter(function (s, i) { return s.indexOf(low) === 0 && all.indexOf(s) === i; });
      if (hits.length === 1) return hits[0];
    }
    return null;
  }
  /* Every series measured at both commits with its estimate and verdict: regression, improvement, same, "no CI"
     (a side without 2 published samples) or "no ratio". */
  function compare(b, n) {
    var base = commits[b], neu = commits[n], st = refs.stats, rows = [];
    Object.keys(neu).forEach(function (sid) {
      if (!base[sid] || !refs.series[sid]) return;
      var s = refs.series[sid], x = { sid: sid, s: s, b: base[sid].median, n: neu[sid].median, est: null };
      if (base[sid].samples && neu[sid].samples) x.est = ratioEstimate(base[sid].samples, neu[sid].samples, st.confidence);
      else if (base[sid].median > 0 && neu[sid].median >= 0) x.est = { ratio: neu[sid].median / base[sid].median, low: null, high: null, p: null };
      if (x.est && !isFinite(x.est.ratio)) x.est = null;
      rows.push(x);
    });
    var tested = rows.filter(function (x) { return x.est && x.est.p !== null; });
    var found = discoveries(tested.map(function (x) { return x.est.p; }), st.fdr_q);
    tested.forEach(function (x, i) { x.discovery = found[i]; });
    rows.forEach(function (x) {
      var e = x.est;
      x.good = e ? (x.s.direction === "higher" ? e.ratio : 1 / e.ratio) : NaN;
      x.colour = !e ? "none" : x.good <= refs.bands.red ? "red" : x.good >= refs.bands.green ? "green" : "grey";
      if (!e) x.verdict = "no ratio";
      else if (e.p === null) x.verdict = "no CI";
      else if (x.discovery && (e.low > 1 || e.high < 1) && Math.abs(e.ratio - 1) >= st.min_effect) x.verdict = x.good > 1 ? "improvement" : "regression";
      else x.verdict = "same";
    });
    return rows;
  }

  // ---------------------------------------------------------------- view
  var VERDICT_ORDER = { regression: 0, improvement: 1, same: 2, "no CI": 3, "no ratio": 4 };
  var KEYS = {
    series: function (x) { return x.s.label; },
    branch: function (x) { return x.s.branch; },
    machine: function (x) { return x.s.machine + " · " + x.s.recipe; },
    base: function (x) { return x.b; },
    new: function (x) { return x.n; },
    ratio: function (x) { return x.est ? x.est.ratio : Infinity; },
    ci: function (x) { return x.est && x.est.low !== null ? (x.est.high - x.est.low) / x.est.ratio : Infinity; },
    verdict: function (x) { return VERDICT_ORDER[x.verdict] * 1e6 - (isFinite(x.good) ? Math.abs(Math.log(x.good)) : 0); }
  };
  var SHOWS = {
    all: function () { return true; },
    changed: function (x) { return x.verdict === "regression" || x.verdict === "improvement"; },
    regressions: function (x) { return x.verdict === "regression"; },
    improvements: function (x) { return x.verdict === "improvement"; }
  };
  var GROUPS = {
    none: null,
    family: function (x) { return x.s.family; },
    group: function (x) { return x.s.group || "other"; },
    machine: function (x) { return x.s.machine; },
    branch: function (x) { return x.s.branch; }
  };
  var DEFAULTS = { show: "all", sort: "verdict", dir: "asc", group: "none" };

  function fmt(x) { var a = Math.abs(x); return a >= 1000 ? Math.round(x).toLocaleString("en-US") : a >= 10 ? x.toFixed(1) : x.toFixed(3); }
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function counts(rows) {
    var c = { regression: 0, improvement: 0, same: 0, other: 0 };
    rows.forEach(function (x) { if (Object.prototype.hasOwnProperty.call(c, x.verdict)) c[x.verdict]++; else c.other++; });
    return c;
  }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
  function summary(c) {
    var parts = [plural(c.regression, "regression", "regressions"), plural(c.improvement, "improvement", "improvements"), c.same + " unchanged"];
    if (c.other) parts.push(c.other + " without a verdict");
    return parts.join(", ");
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("compare"), status = document.getElementById("status");
    var table = document.getElementById("result"), tbody = table.querySelector("tbody");
    var sum = document.getElementById("summary"), controls = document.getElementById("view");
    var showSel = document.getElementById("show"), groupSel = document.getElementById("group");
    var params = new URLSearchParams(location.search);
    var state = {
      base: params.get("base") || "", new: params.get("new") || "",
      show: SHOWS[params.get("show")] ? params.get("show") : DEFAULTS.show,
      sort: KEYS[params.get("sort")] ? params.get("sort") : DEFAULTS.sort,
      dir: params.get("dir") === "desc" ? "desc" : "asc",
      group: Object.prototype.hasOwnProperty.call(GROUPS, params.get("group")) ? params.get("group") : DEFAULTS.group
    };
    var current = null;
    document.getElementById("base").value = state.base;
    document.getElementById("new").value = state.new;
    showSel.value = state.show; groupSel.value = state.group;
    if (!Object.keys(refs.series).some(function (sid) { return refs.series[sid].group; })) {
      var opt = groupSel.querySelector("option[value=group]"); if (opt) opt.remove();
    }

    function writeUrl() {  // the comparison as a link: base, new and every view setting not at its default
      var p = new URLSearchParams();
      p.set("base", state.base); p.set("new", state.new);
      ["show", "sort", "dir", "group"].forEach(function (k) { if (state[k] !== DEFAULTS[k]) p.set(k, state[k]); });
      history.replaceState(null, "", "?" + p.toString());
    }
    function run() {
      var b = resolve(state.base), n = resolve(state.new);
      if (!b || !n) {
        status.textContent = "Unknown " + (!b ? state.base : state.new) + ": use a release tag, a full sha, or an unambiguous prefix of a recent one.";
        table.hidden = true; controls.hidden = true; sum.textContent = ""; return;
      }
      var missing = function (s) { return function () { status.textContent = "No published measurements for " + s + "."; table.hidden = true; controls.hidden = true; sum.textContent = ""; }; };
      load(b, function () { load(n, function () { current = { b: b, n: n, rows: compare(b, n) }; writeUrl(); show(); }, missing(n)); }, missing(b));
    }
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      state.base = document.getElementById("base").value.trim(); state.new = document.getElementById("new").value.trim();
      run();
    });
    showSel.addEventListener("change", function () { state.show = showSel.value; writeUrl(); show(); });
    groupSel.addEventListener("change", function () { state.group = groupSel.value; writeUrl(); show(); });
    table.querySelectorAll("thead button[data-sort]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var k = btn.dataset.sort;
        if (state.sort === k) state.dir = state.dir === "asc" ? "desc" : "asc"; else { state.sort = k; state.dir = "asc"; }
        if (current) { writeUrl(); show(); }
      });
    });

    function cmp(x, y) {
      var f = KEYS[state.sort], a = f(x), b = f(y), o = a < b ? -1 : a > b ? 1 : 0;
      if (!o) o = x.s.label < y.s.label ? -1 : x.s.label > y.s.label ? 1 : x.sid < y.sid ? -1 : x.sid > y.sid ? 1 : 0;
      return state.dir === "desc" ? -o : o;
    }
    function row(x) {
      var tr = el("tr"), first = el("td"), a = el("a", x.s.label);
      tr.dataset.sid = x.sid; tr.dataset.verdict = x.verdict;
      a.href = "series/" + encodeURIComponent(x.sid) + ".html"; first.appendChild(a); tr.appendChild(first);
      tr.appendChild(el("td", x.s.branch)); tr.appendChild(el("td", x.s.machine + " · " + x.s.recipe));
      tr.appendChild(el("td", fmt(x.b) + " " + x.s.unit, "num")); tr.appendChild(el("td", fmt(x.n) + " " + x.s.unit, "num"));
      var e = x.est;
      tr.appendChild(el("td", e ? e.ratio.toFixed(3) + (x.colour === "red" ? " ▼" : x.colour === "green" ? " ▲" : "") : "–", "num ratio cell-" + x.colour));
      tr.appendChild(el("td", e && e.low !== null ? "[" + e.low.toFixed(3) + ", " + e.high.toFixed(3) + "]" : "–", "num ci"));
      tr.appendChild(el("td", x.verdict, "verdict verdict-" + x.verdict.replace(/ /g, "-")));
      return tr;
    }
    function show() {
      var rows = current.rows.filter(SHOWS[state.show]).sort(cmp), key = GROUPS[state.group];
      tbody.replaceChildren();
      if (!key) rows.forEach(function (x) { tbody.appendChild(row(x)); });
      else {
        var groups = {};
        rows.forEach(function (x) { (groups[key(x)] = groups[key(x)] || []).push(x); });
        Object.keys(groups).sort().forEach(function (g) {
          var head = el("tr", undefined, "group"), th = el("th", g + " — " + summary(counts(groups[g])));
          th.colSpan = 8; th.scope = "rowgroup"; head.appendChild(th); head.dataset.group = g; tbody.appendChild(head);
          groups[g].forEach(function (x) { tbody.appendChild(row(x)); });
        });
      }
      table.querySelectorAll("thead th").forEach(function (th) { th.removeAttribute("aria-sort"); });
      var active = table.querySelector("thead button[data-sort='" + state.sort + "']");
      if (active) active.parentNode.setAttribute("aria-sort", state.dir === "asc" ? "ascending" : "descending");
      var c = counts(current.rows);
      sum.textContent = summary(c) + " (" + current.rows.length + " series measured at both)";
      status.textContent = "Base " + current.b.slice(0, 12) + ", new " + current.n.slice(0, 12) + (rows.length < current.rows.length ? "; showing " + rows.length + " of " + current.rows.length + " series." : ".");
      table.hidden = false; controls.hidden = false;
      if (!document.body.dataset.ready) document.body.dataset.readyMs = String(Math.round(performance.now()));
      document.body.dataset.ready = "1";
    }
    if (state.base && state.new) run();
  });
})();
