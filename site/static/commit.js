/* The commit page: one static shell; the commit comes from ?c=<sha> and its data from data/commits/<sha>.js.
   Untrusted text (subject, author, refs, logs) only ever goes through textContent. */
(function () {
  "use strict";
  var pf = window.perffarm = window.perffarm || {};
  var refs = null, data = {};
  pf.refs = function (d) { refs = d; };
  pf.commit = function (sha, d) { data[sha] = d; };
  var branchRows = {}, waiting = {};  // data/branches/<name>/<chunk>.js: [sha, subject, author, authored_at] per position
  pf.commits = function (branch, k, rows) {
    branchRows[branch + "/" + k] = rows;
    (waiting[branch + "/" + k] || []).forEach(function (cb) { cb(); });
  };
  var SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function fmt(x) {
    if (x === null || x === undefined) return "–";
    var a = Math.abs(x);
    if (a >= 1000) return Math.round(x).toLocaleString("en-US");
    if (a >= 10) return x.toFixed(1);
    if (a >= 0.01 || a === 0) return x.toFixed(3);
    return x.toPrecision(3);
  }
  function when(ts) { return ts ? new Date(ts * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "–"; }

  document.addEventListener("DOMContentLoaded", function () {
    var sha = (new URLSearchParams(location.search).get("c") || "").toLowerCase();
    var status = document.getElementById("status");
    if (!/^[0-9a-f]{7,64}$/.test(sha)) { status.textContent = "No commit given: open this page as commit.html?c=<full sha>."; return; }
    var s = document.createElement("script");
    s.src = "data/commits/" + sha + ".js";
    s.onerror = function () { status.textContent = "No published data for commit " + sha + " (not measured, or not published yet)."; };
    s.onload = function () { if (data[sha]) show(sha, data[sha]); else status.textContent = "The data file for " + sha + " is empty."; };
    document.head.appendChild(s);
  });

  // The message body as written: paragraphs (blank-line separated) as <p>, their line breaks kept by CSS; text only.
  function showMessage(body) {
    var box = document.getElementById("message");
    box.replaceChildren();
    body.split(/\n[ \t]*\n+/).forEach(function (para) {
      para = para.replace(/^\n+|\s+$/g, "");
      if (para) box.appendChild(el("p", para));
    });
    box.hidden = !box.childNodes.length;
  }

  // The commit's neighbours in first-parent order on each branch that holds it: the parent is its first parent
  // (in the data file, linked in the facts line); the next commit is at position + 1 in the branch's commit facts (data/branches/<file>/
  // <chunk>.js, 1,000 commits a file), read only when asked for (a press, or the pointer or focus on the button),
  // so the page itself loads no more than before.
  function branchFacts(file, pos, size, cb) {
    var k = Math.floor(pos / size), key = file + "/" + k;
    var row = function () { var rows = branchRows[key]; cb(rows && rows[pos - k * size] || null); };
    if (branchRows[key]) { row(); return; }
    if (waiting[key]) { waiting[key].push(row); return; }
    waiting[key] = [row];
    var s = document.createElement("script");
    s.src = "data/branches/" + encodeURIComponent(file) + "/" + k + ".js";
    s.onerror = function () { branchRows[key] = []; waiting[key].forEach(function (f) { f(); }); };
    document.head.appendChild(s);
  }
  function showNav(d) {
    var nav = document.getElementById("commit-nav"), size = d.chunk_size || 1000;
    nav.replaceChildren();
    (d.positions || []).forEach(function (b) {  // [branch, file name, position]
      var btn = el("button", "next commit on " + b[0] + " →", "next");
      btn.type = "button";
      var look = function (go) {
        branchFacts(b[1], b[2] + 1, size, function (row) {
          if (row && SHA.test(row[0])) {
            btn.title = row[0].slice(0, 12) + " " + row[1];
            if (go) location.href = "commit.html?c=" + row[0];
          } else {
            var none = el("span", "newest commit on " + b[0], "none");
            btn.replaceWith(none);
          }
        });
      };
      btn.addEventListener("mouseenter", function () { look(false); });
      btn.addEventListener("focus", function () { look(false); });
      btn.addEventListener("click", function () { look(true); });
      nav.appendChild(btn);
    });
    nav.dataset.ready = "1";
  }

  function show(sha, d) {
    document.title = sha.slice(0, 12) + " " + d.subject + " · perffarm";
    document.getElementById("subject").textContent = d.subject;
    var facts = document.getElementById("facts");
    facts.replaceChildren(el("span", sha, "sha"), document.createTextNode(" · " + d.author + " · " + when(d.authored_at)));
    d.tags.forEach(function (t) { facts.appendChild(document.createTextNode(" · tag ")); facts.appendChild(el("span", t, "tagname")); });
    var parent = (d.parents || [])[0];
    if (parent && SHA.test(parent)) {  // every series of the commit against its parent's
      var up = el("a", parent.slice(0, 12), "sha parent");
      up.href = "commit.html?c=" + parent;
      facts.appendChild(document.createTextNode(" · parent ")); facts.appendChild(up);
      var cmp = el("a", "compare with parent", "compare-parent");
      cmp.href = "compare.html?base=" + parent + "&new=" + sha;
      facts.appendChild(document.createTextNode(" · ")); facts.appendChild(cmp);
    }
    showMessage(d.message || "");
    showNav(d);
    var tbody = document.querySelector("#rows tbody"), series = (refs && refs.series) || {};
    d.rows.forEach(function (r) {
      // [sid, median, n, ratio, ci_low, ci_high, colour, base, flags, samples]; ratio and CI in millionths
      // (master/publish/commits.py)
      var s = series[r[0]] || { label: r[0], branch: "", machine: "", recipe: "", unit: "" };
      var tr = el("tr"), first = el("td"), a = el("a", s.label);
      a.href = "series/" + encodeURIComponent(r[0]) + ".html"; first.appendChild(a);
      if (r[8] & 1) first.appendChild(el("span", " noisy host", "noisy"));
      if (r[8] & 2) first.appendChild(el("span", " SLA miss", "sla"));
      tr.appendChild(first); tr.appendChild(el("td", s.branch)); tr.appendChild(el("td", s.machine + " · " + s.recipe));
      tr.appendChild(el("td", fmt(r[1]) + " " + s.unit, "num"));
      tr.appendChild(el("td", String(r[2]), "num"));
      var rc = el("td");
      if (r[3] === null) rc.appendChild(el("span", "–", "rq none"));
      else {
        rc.appendChild(el("span", (r[3] / 1e6).toFixed(3) + (r[6] === "red" ? " ▼" : r[6] === "green" ? " ▲" : ""), "rq " + r[6]));
        if (r[4] !== null) rc.appendChild(el("span", " [" + (r[4] / 1e6).toFixed(3) + ", " + (r[5] / 1e6).toFixed(3) + "]", "ci"));
        rc.appendChild(el("span", " vs " + r[7], "muted"));
      }
      tr.appendChild(rc); tbody.appendChild(tr);
    });
    // [sid, workload, machine, branch, summary, previous sha, before, after] (master/publish/pages/commit.py)
    var pb = document.querySelector("#plans tbody");
    (d.plans || []).forEach(function (p) {
      var tr = el("tr"), first = el("td"), a = el("a", p[1]);
      a.href = "series/" + encodeURIComponent(p[0]) + ".html"; first.appendChild(a); tr.appendChild(first);
      tr.appendChild(el("td", p[3])); tr.appendChild(el("td", p[2]));
      var ch = el("td"); ch.appendChild(el("b", p[4])); ch.appendChild(el("span", " after " + p[5].slice(0, 12), "muted"));
      tr.appendChild(ch);
      [p[6], p[7]].forEach(function (shape) { var c = el("td"); c.appendChild(el("pre", shape, "plan")); tr.appendChild(c); });
      pb.appendChild(tr);
    });
    document.getElementById("plans-box").hidden = !(d.plans && d.plans.length);
    var rb = document.querySelector("#runs tbody");
    d.runs.forEach(function (r) {
      // [id, status, ref, builder, worker, source, ingested_at, build_url, log_excerpt]
      var tr = el("tr");
      [String(r[0]), r[1], r[2], r[3], r[4], r[5], when(r[6])].forEach(function (t, i) { tr.appendChild(el("td", t, i === 1 ? "status-" + r[1] : undefined)); });
      var bc = el("td");
      if (r[7]) { var a = el("a", "build log"); a.href = r[7]; a.rel = "nofollow"; bc.appendChild(a); }
      tr.appendChild(bc); rb.appendChild(tr);
      if (r[8]) { var lr = el("tr"), c = el("td"); c.colSpan = 8; c.appendChild(el("pre", r[8], "log")); lr.appendChild(c); rb.appendChild(lr); }
    });
    document.getElementById("status").textContent = d.rows.length ? "" : "No successful measurement of this commit.";
    document.body.dataset.ready = "1";
  }
})();
