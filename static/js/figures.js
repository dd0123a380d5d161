// Draws each .plot of a page from the JSON that follows it (json_script), with plotly's
// cloud and share buttons off — research data never leaves the server — and a toolbar of one
// button (download as PNG), so keyboard users reach the tables and CSV links quickly.
// A point whose customdata (or its trace's meta) is a site path ("/p/...") opens it: a figure
// links to the tasks behind a number.
//
// Figures are drawn lazily: those in the first screenful at once, the others when they are
// scrolled near (an IntersectionObserver with a margin below the window; those already that near
// on load, at the first scroll), one figure per task.
// Drawing every figure of a dashboard on load cost about half a second of script on the main
// thread, most of it for figures nobody had scrolled to yet. A drawn figure gets
// data-drawn="yes" (browser tests wait for it).
(function () {
  "use strict";
  const CONFIG = {
    displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false,
    showLink: false, modeBarButtons: [["toImage"]],
  };
  // How far below the window a figure starts drawing: about one figure's height, so a reader
  // scrolling at an ordinary pace finds it drawn.
  const NEAR = "0px 0px 400px 0px";
  const queue = [];
  let drawing = false;

  function draw(el) {
    const figure = JSON.parse(el.nextElementSibling.textContent);
    return Plotly.newPlot(el, figure.data, figure.layout, CONFIG).then(function () {
      el.dataset.drawn = "yes";
      el.on("plotly_click", function (event) {
        const point = event.points && event.points[0];
        // A point's own link, or its trace's (`meta`: a box stands for all its answers).
        const target = point && (point.customdata !== undefined ? point.customdata : point.data && point.data.meta);
        const path = Array.isArray(target) ? target[target.length - 1] : target;
        if (typeof path === "string" && path.startsWith("/")) window.location.assign(path);
      });
    });
  }

  function enqueue(el) {
    if (el.dataset.drawn) return;
    el.dataset.drawn = "queued";
    queue.push(el);
    next();
  }

  // One figure per task: the page stays responsive while they are drawn.
  function next() {
    if (drawing) return;
    const el = queue.shift();
    if (!el) return;
    drawing = true;
    Promise.resolve(el).then(draw).catch(function (error) { console.error(error); })
      .then(function () { drawing = false; setTimeout(next, 0); });
  }

  function start() {
    const plots = Array.from(document.querySelectorAll(".plot"));
    if (!("IntersectionObserver" in window)) {
      plots.forEach(enqueue);
      return;
    }
    // Near the window on load but not in it: drawn at the first scroll, not while the page loads.
    const nearOnLoad = [];
    let loading = true;
    const observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        observer.unobserve(entry.target);
        if (loading && entry.boundingClientRect.top >= window.innerHeight) nearOnLoad.push(entry.target);
        else enqueue(entry.target);
      });
      loading = false;
    }, { rootMargin: NEAR });
    plots.forEach(function (el) { observer.observe(el); });
    window.addEventListener("scroll", function () { nearOnLoad.splice(0).forEach(enqueue); }, { passive: true });
  }

  // Printing (or saving as PDF) draws every figure first, at once: a printed dashboard is complete
  // even where the reader never scrolled. Plotly lays a figure out synchronously in newPlot.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll(".plot").forEach(function (el) {
      if (el.dataset.drawn === "yes") return;
      const index = queue.indexOf(el);
      if (index >= 0) queue.splice(index, 1);
      el.dataset.drawn = "printing";
      draw(el).catch(function (error) { console.error(error); });
    });
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
