/* The console's few behaviours, from a file so the Content-Security-Policy allows no inline script.
   Event delegation on document: htmx swaps the regions these elements live in. */
(function () {
  "use strict";

  // "Select all on this page" in the dead-letter list.
  document.addEventListener("change", function (event) {
    if (event.target.id !== "select-all") { return; }
    document.querySelectorAll("#bulk-form input[name=ids]").forEach(function (box) {
      box.checked = event.target.checked;
    });
  });

  // A bulk action on "the selected rows" with nothing ticked: say so next to the buttons, post nothing.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "bulk-form") { return; }
    var scope = form.querySelector("input[name=scope]:checked");
    var ticked = form.querySelectorAll("input[name=ids]:checked").length;
    var message = document.getElementById("bulk-error");
    if (scope && scope.value === "selected" && ticked === 0) {
      event.preventDefault();
      if (message) {
        // The words come from the page (data-nothing-ticked), in its language.
        message.textContent = message.getAttribute("data-nothing-ticked");
        message.hidden = false;
      }
    } else if (message) {
      message.hidden = true;
    }
  });

  // On a phone the sections scroll sideways in one row: bring the current one into view.
  document.addEventListener("DOMContentLoaded", function () {
    var current = document.querySelector(".nav [aria-current=page]");
    var nav = current && current.parentElement;
    if (nav && nav.scrollWidth > nav.clientWidth) {
      nav.scrollLeft = current.offsetLeft - (nav.clientWidth - current.offsetWidth) / 2;
    }
  });

  // "Pause auto-refresh" on the dashboard: skip the poll while ticked (a number being read
  // at 3 a.m. should not jump).
  document.addEventListener("htmx:beforeRequest", function (event) {
    var pause = document.getElementById("pause-refresh");
    var polled = event.target.id === "dashboard-stats" || event.target.id === "kind-charts";
    if (polled && pause && pause.checked) { event.preventDefault(); }
  });
})();
