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
  function draw(el) {
    const figure = JSON.parse(el.nextElementSibling.textContent);
    return Plotly.newPlot(el, figure.data, figure.layout, CONFIG).then(function () {
      el.on("plotly_click", function (event) {
        const target = event.points && event.points[0] && event.points[0].customdata;
        const path = Array.isArray(target) ? target[target.length - 1] : target;
        if (typeof path === "string" && path.startsWith("/")) window.location.assign(path);
      });
    });
  }
  // One figure per task, those in the window first: the page stays responsive while they are
  // drawn (one long task for all of them blocked input for seconds on a slow machine).
  function drawAll() {
    const plots = Array.from(document.querySelectorAll(".plot"));
    const inView = plots.filter(function (el) { return el.getBoundingClientRect().top < window.innerHeight; });
    const queue = inView.concat(plots.filter(function (el) { return inView.indexOf(el) < 0; }));
    (function next() {
      const el = queue.shift();
      if (!el) return;
      Promise.resolve(el).then(draw).catch(function (error) { console.error(error); })
        .then(function () { setTimeout(next, 0); });
    })();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
})();
