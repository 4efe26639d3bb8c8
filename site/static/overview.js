/* overview/<machine>.html filters: show only the rows matching the chosen branch and workload. */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var selects = document.querySelectorAll("#filters select");
    var rows = document.querySelectorAll("#overview tbody tr");
    var shown = document.getElementById("shown");
    function apply() {
      var want = {};
      selects.forEach(function (s) { want[s.getAttribute("data-filter")] = s.value; });
      var count = 0;
      rows.forEach(function (r) {
        var ok = Object.keys(want).every(function (k) { return !want[k] || r.getAttribute("data-" + k) === want[k]; });
        r.hidden = !ok; if (ok) count++;
      });
      shown.textContent = count + " series";
    }
    selects.forEach(function (s) { s.addEventListener("change", apply); });
    apply();
  });
})();
