/* overview/<machine>.html filters: show only the rows matching the chosen group, branch and workload; a group's
   heading shows while any of its rows does. */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var selects = document.querySelectorAll("#filters select");
    var rows = document.querySelectorAll("#overview tbody tr.row");
    var groups = document.querySelectorAll("#overview tbody[data-group]");
    var shown = document.getElementById("shown");
    function apply() {
      var want = {};
      selects.forEach(function (s) { want[s.getAttribute("data-filter")] = s.value; });
      var count = 0;
      rows.forEach(function (r) {
        var ok = Object.keys(want).every(function (k) { return !want[k] || r.getAttribute("data-" + k) === want[k]; });
        r.hidden = !ok; if (ok) count++;
      });
      groups.forEach(function (g) { g.hidden = !g.querySelector("tr.row:not([hidden])"); });
      shown.textContent = count + " series";
    }
    selects.forEach(function (s) { s.addEventListener("change", apply); });
    apply();
  });
})();
