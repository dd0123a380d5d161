// Draws every .plot of a page from the JSON that follows it (json_script), with plotly's
// cloud and share buttons off — research data never leaves the server — and a toolbar of one
// button (download as PNG), so keyboard users reach the tables and CSV links quickly.
// A point whose customdata is a site path ("/p/...") opens it: a figure links to the tasks
// behind a number.
(function () {
  "use strict";
  const CONFIG = {
    displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false,
    showLink: false, modeBarButtons: [["toImage"]],
  };
  function draw() {
    document.querySelectorAll(".plot").forEach(function (el) {
      const figure = JSON.parse(el.nextElementSibling.textContent);
      Plotly.newPlot(el, figure.data, figure.layout, CONFIG).then(function () {
        el.on("plotly_click", function (event) {
          const target = event.points && event.points[0] && event.points[0].customdata;
          const path = Array.isArray(target) ? target[target.length - 1] : target;
          if (typeof path === "string" && path.startsWith("/")) window.location.assign(path);
        });
      });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
