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

  // Commits by the words of their subject or author: the branches' commit facts (data/branches/<file>/<chunk>.js,
  // [sha, subject, author, authored_at] per position, what the charts' hovers read, ~90 kB per 1,000 commits),
  // FILES of them per round (a page with what it loads stays under 1 MB), newest first: the newest file of each
  // branch (the longest branch first), then the next older of each, and so on; a button reads the next round.
  // Shared history is in several branches' files: a commit is listed once.
  var FILES = 6, rowsOf = {}, waiting = {};
  pf.commits = function (file, k, rows) {
    rowsOf[file + "/" + k] = rows;
    (waiting[file + "/" + k] || []).forEach(function (cb) { cb(); });
  };
  function load(file, k, cb) {
    var key = file + "/" + k;
    if (rowsOf[key]) { cb(); return; }
    (waiting[key] = waiting[key] || []).push(cb);
    if (waiting[key].length > 1) return;
    var s = document.createElement("script");
    s.src = "data/branches/" + encodeURIComponent(file) + "/" + k + ".js";
    s.onerror = function () { rowsOf[key] = []; waiting[key].forEach(function (f) { f(); }); };
    document.head.appendChild(s);
  }
  function day(ts) { return ts ? new Date(ts * 1000).toISOString().slice(0, 10) : ""; }
  function searchSubjects(words) {
    var meta = JSON.parse(document.getElementById("facts").textContent), size = meta.chunk_size;
    var list = document.getElementById("subjects"), note = document.getElementById("subject-status");
    var older = document.getElementById("older"), seen = {}, hits = [], searched = 0;
    // the files to read, in order: round-robin over the branches (longest first), each branch's newest first
    var branches = meta.branches.slice().sort(function (a, b) { return b[2] - a[2] || (a[0] < b[0] ? -1 : 1); });
    var queue = [], depth = 0, more = true;
    while (more) {
      more = false;
      branches.forEach(function (b) {
        var k = Math.floor(b[2] / size) - depth;
        if (k >= 0) { queue.push([{ name: b[0], file: b[1] }, k]); more = true; }
      });
      depth++;
    }
    function matches(text) { text = text.toLowerCase(); return words.every(function (w) { return text.indexOf(w) >= 0; }); }
    function round() {
      var todo = queue.splice(0, FILES), left = todo.length;
      older.hidden = true;
      if (!left) { done(); return; }
      todo.forEach(function (t) {
        load(t[0].file, t[1], function () {
          (rowsOf[t[0].file + "/" + t[1]] || []).forEach(function (r, i) {
            if (!r || seen[r[0]]) return;
            seen[r[0]] = true; searched++;
            if (matches(r[1] + " " + r[2])) hits.push({ row: r, branch: t[0].name, pos: t[1] * size + i });
          });
          if (--left === 0) done();
        });
      });
    }
    function done() {
      // newest first: by branch position (first-parent order; dates can tie or go backwards), then date
      hits.sort(function (a, b) { return b.pos - a.pos || b.row[3] - a.row[3] || (a.row[0] < b.row[0] ? -1 : 1); });
      list.replaceChildren();
      hits.slice(0, LIMIT).forEach(function (h) {
        var li = el("li"), r = h.row;
        li.appendChild(link(r[0].slice(0, 12), "commit.html?c=" + encodeURIComponent(r[0])));
        li.appendChild(document.createTextNode(" " + r[1] + " "));
        li.appendChild(el("span", "· " + r[2] + " · " + day(r[3]) + " · " + h.branch, "muted"));
        list.appendChild(li);
      });
      var more = queue.length > 0;
      note.textContent = hits.length + " of the newest " + searched.toLocaleString("en-US") + " commits match" +
        (hits.length > LIMIT ? " (the newest " + LIMIT + " shown)" : "") + (more ? "; older commits are not searched yet." : "; that is every commit of every branch.");
      older.hidden = !more;
      list.dataset.searched = String(searched);
      document.body.dataset.subjects = "1";
    }
    older.addEventListener("click", function () { round(); });
    round();
  }

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
    searchSubjects(words);
    status.textContent = series.length + " series" + (series.length > LIMIT ? " (the first " + LIMIT + " shown)" : "") + " and " + found + " tags or commits match " + JSON.stringify(q) + ".";
    document.body.dataset.ready = "1";
  });
})();
