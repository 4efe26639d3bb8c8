// archaeology.html: the release checkboxes show or hide each release's lines and bars (without script, all show).
(function () {
  "use strict";
  var pick = document.getElementById("pick");
  if (!pick) return;
  function apply() {
    var hidden = {};
    pick.querySelectorAll("input[data-release]").forEach(function (box) {
      if (!box.checked) hidden[box.getAttribute("data-release")] = true;
    });
    document.querySelectorAll("g.release").forEach(function (g) {
      g.style.display = hidden[g.getAttribute("data-release")] ? "none" : "";
    });
  }
  pick.addEventListener("change", apply);
  apply();
})();
