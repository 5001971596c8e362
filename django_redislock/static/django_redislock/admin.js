// The dead list's "check all" box: checks or clears every job's box of the page. A file of
// its own (not an inline handler), so a Content-Security-Policy of script-src 'self' allows it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var all = document.getElementById("check-all");
  if (!all) return;
  all.addEventListener("click", function () {
    document.querySelectorAll("#jobs input[name=job]").forEach(function (box) {
      box.checked = all.checked;
    });
  });
});
