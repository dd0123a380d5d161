// Every page: a table that scrolls sideways on its own (a wide one on a narrow screen, site.css) is
// made focusable, so that it can be scrolled from the keyboard (WCAG 2.1.1); one that fits is not a tab stop.
(function () {
  "use strict";
  function focusableScrollers() {
    document.querySelectorAll("main table").forEach(function (table) {
      if (table.scrollWidth > table.clientWidth) table.tabIndex = 0;
      else table.removeAttribute("tabindex");
    });
  }
  window.addEventListener("resize", focusableScrollers, { passive: true });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", focusableScrollers);
  else focusableScrollers();
})();
