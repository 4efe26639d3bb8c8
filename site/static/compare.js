/* Compare two commits or tags from the published per-commit data (median(new) / median(base) per series). */
(function () {
  "use strict";
  var pf = window.perffarm = window.perffarm || {};
  var refs = null, commits = {}, waiting = {};
  pf.refs = function (d) { refs = d; };
  pf.commit = function (sha, d) {
    var by = {};  // sid -> [median, n] (rows: [sid, median, n, ...], see master/publish/publisher.commit_rows)
    d.rows.forEach(function (r) { by[r[0]] = [r[1], r[2]]; });
    commits[sha] = by; (waiting[sha] || []).forEach(function (cb) { cb(); }); waiting[sha] = [];
  };

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
  function fmt(x) { var a = Math.abs(x); return a >= 1000 ? Math.round(x).toLocaleString("en-US") : a >= 10 ? x.toFixed(1) : x.toFixed(3); }
  function td(text, cls) { var c = document.createElement("td"); if (cls) c.className = cls; c.textContent = text; return c; }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("compare"), status = document.getElementById("status");
    var table = document.getElementById("result"), tbody = table.querySelector("tbody");
    var params = new URLSearchParams(location.search);
    if (params.get("base")) document.getElementById("base").value = params.get("base");
    if (params.get("new")) document.getElementById("new").value = params.get("new");
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      var bt = document.getElementById("base").value, nt = document.getElementById("new").value;
      var b = resolve(bt), n = resolve(nt);
      if (!b || !n) { status.textContent = "Unknown " + (!b ? bt : nt) + ": use a release tag, a full sha, or an unambiguous prefix of a recent one."; return; }
      var missing = function (s) { return function () { status.textContent = "No published measurements for " + s + "."; table.hidden = true; }; };
      load(b, function () { load(n, function () { show(b, n); }, missing(n)); }, missing(b));
    });
    function show(b, n) {
      var base = commits[b], neu = commits[n], rows = [];
      Object.keys(neu).forEach(function (sid) {
        if (!base[sid] || !refs.series[sid]) return;
        var s = refs.series[sid], r = neu[sid][0] / base[sid][0];
        var g = s.direction === "higher" ? r : 1 / r;
        var colour = g <= refs.bands.red ? "red" : g >= refs.bands.green ? "green" : "grey";
        rows.push({ s: s, sid: sid, b: base[sid][0], n: neu[sid][0], r: r, colour: colour });
      });
      rows.sort(function (x, y) { return x.s.label < y.s.label ? -1 : x.s.label > y.s.label ? 1 : 0; });
      tbody.replaceChildren();
      rows.forEach(function (x) {
        var tr = document.createElement("tr");
        var first = document.createElement("td"), a = document.createElement("a");
        a.href = "series/" + encodeURIComponent(x.sid) + ".html"; a.textContent = x.s.label; first.appendChild(a); tr.appendChild(first);
        tr.appendChild(td(x.s.branch)); tr.appendChild(td(x.s.machine + " · " + x.s.recipe));
        tr.appendChild(td(fmt(x.b) + " " + x.s.unit, "num")); tr.appendChild(td(fmt(x.n) + " " + x.s.unit, "num"));
        var rc = td(x.r.toFixed(3) + (x.colour === "red" ? " ▼" : x.colour === "green" ? " ▲" : ""), "num ratio cell-" + x.colour);
        tr.appendChild(rc);
        tbody.appendChild(tr);
      });
      table.hidden = false;
      document.body.dataset.ready = "1";
      status.textContent = rows.length + " series measured at both " + b.slice(0, 12) + " and " + n.slice(0, 12) + ".";
    }
  });
})();
