/* search.html?q=...: series, workloads, machines, branches and tags whose names contain every word of the query,
   and commits by sha, from data/refs.js. Untrusted text (labels, tag names) only ever goes through textContent. */
(function () {
  "use strict";
  var pf = window.perffarm = window.perffarm || {};
  var refs = null;
  pf.refs = function (d) { refs = d; };
  var LIMIT = 200;

  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function link(text, href) { var a = el("a", text); a.href = href; return a; }

  document.addEventListener("DOMContentLoaded", function () {
    var q = (new URLSearchParams(location.search).get("q") || "").trim();
    var box = document.querySelector("header.top input[name=q]");
    if (box) box.value = q;
    var status = document.getElementById("status"), tbody = document.querySelector("#series tbody");
    var list = document.getElementById("commits");
    if (!q) { document.body.dataset.ready = "1"; return; }
    var words = q.toLowerCase().split(/\s+/);
    function matches(text) { text = text.toLowerCase(); return words.every(function (w) { return text.indexOf(w) >= 0; }); }
    var series = Object.keys(refs.series).filter(function (sid) {
      var s = refs.series[sid];
      return matches([s.label, s.family, s.machine, s.branch, s.recipe, s.group || "", sid].join(" "));
    });
    series.sort(function (a, b) { var x = refs.series[a].label, y = refs.series[b].label; return x < y ? -1 : x > y ? 1 : a < b ? -1 : 1; });
    series.slice(0, LIMIT).forEach(function (sid) {
      var s = refs.series[sid], tr = el("tr"), first = el("td");
      first.appendChild(link(s.label, "series/" + encodeURIComponent(sid) + ".html")); tr.appendChild(first);
      tr.appendChild(el("td", s.branch)); tr.appendChild(el("td", s.machine + " · " + s.recipe)); tr.appendChild(el("td", s.family));
      tbody.appendChild(tr);
    });
    var found = 0, low = q.toLowerCase();
    Object.keys(refs.tags).sort().forEach(function (t) {
      if (!matches(t) || found >= LIMIT) return;
      var li = el("li"), sha = refs.tags[t];
      li.appendChild(link(t, "commit.html?c=" + encodeURIComponent(sha)));
      li.appendChild(document.createTextNode(" " + sha.slice(0, 12)));
      list.appendChild(li); found++;
    });
    if (/^[0-9a-f]{4,64}$/.test(low)) {
      var shas = /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(low) ? [low] : refs.recent.concat(Object.keys(refs.tags).map(function (t) { return refs.tags[t]; }));
      shas.filter(function (s, i) { return s.indexOf(low) === 0 && shas.indexOf(s) === i; }).forEach(function (s) {
        var li = el("li"); li.appendChild(link(s, "commit.html?c=" + encodeURIComponent(s))); list.appendChild(li); found++;
      });
    }
    status.textContent = series.length + " series" + (series.length > LIMIT ? " (the first " + LIMIT + " shown)" : "") + " and " + found + " tags or commits match " + JSON.stringify(q) + ".";
    document.body.dataset.ready = "1";
  });
})();
