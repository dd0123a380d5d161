// Draws each .plot of a page from the JSON that follows it (json_script), with plotly's
// cloud and share buttons off — research data never leaves the server — and a toolbar of one
// button (download as PNG), so keyboard users reach the tables and CSV links quickly.
// A point whose customdata (or its trace's meta) is a site path ("/p/...") opens it: a figure
// links to the tasks behind a number.
//
// Plotly itself (static/vendor/plotly, 1.2 MB) is loaded only when the first figure is drawn: its
// parsing and start-up are one long task of the main thread (about 0.3 s on a laptop, over a second
// on a phone), which made every page with figures slow to answer while it loaded.
// Figures are drawn lazily, one per task: those at least half in the window on load at once; those
// near it (an IntersectionObserver with a margin below the window) or only peeking in at its bottom
// edge at the reader's first scroll, key or touch; the others when they are scrolled near.
// Until then each container holds its figure's height and a line saying what it will show (the
// numbers are in the table beside it). A drawn figure gets data-drawn="yes" (browser tests wait for it).
// Were plotly not to load (the network or the server failing), the line says the figure could not be
// drawn, and the reader's next scroll, key or touch, or printing, tries again.
(function () {
  "use strict";
  const CONFIG = {
    displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false,
    showLink: false, modeBarButtons: [["toImage"]],
  };
  // How far below the window a figure starts drawing: about one figure's height, so a reader
  // scrolling at an ordinary pace finds it drawn.
  const NEAR = "0px 0px 400px 0px";
  const PLOTLY_URL = document.currentScript.dataset.plotly;
  const MOVES = ["scroll", "keydown", "pointerdown", "touchstart"];
  const queue = [];
  let drawing = false;
  let plotly = null;
  let observer = null;  // draws the figures scrolled near (start), where IntersectionObserver exists

  // Plotly, loaded once (a script of this site: the Content-Security-Policy allows it). A failed load
  // is not kept: the next call tries again, with a new script element (a failed one does not retry).
  function loadPlotly() {
    if (!plotly) {
      plotly = new Promise(function (resolve, reject) {
        if (window.Plotly) { resolve(window.Plotly); return; }
        const script = document.createElement("script");
        script.src = PLOTLY_URL;
        script.onload = function () { resolve(window.Plotly); };
        script.onerror = function () {
          script.remove();
          plotly = null;
          reject(new Error("plotly did not load from " + PLOTLY_URL));
        };
        document.head.appendChild(script);
      });
    }
    return plotly;
  }

  // Figures left undrawn because plotly did not load: their line says so, and they are drawn again
  // (when near the window) at the reader's next scroll, key or touch; printing retries them too.
  const failed = new Set();
  function notDrawn(els) {
    els.forEach(function (el) {
      delete el.dataset.drawn;
      const state = el.querySelector(".plot-state");
      if (state) state.textContent = "could not be drawn (its numbers are in its table); scrolling tries again.";
      failed.add(el);
    });
    MOVES.forEach(function (type) { window.addEventListener(type, retry, { passive: true }); });
  }

  function retry() {
    MOVES.forEach(function (type) { window.removeEventListener(type, retry); });
    const els = Array.from(failed);
    failed.clear();
    els.forEach(function (el) { if (observer) observer.observe(el); else enqueue(el); });
  }

  function draw(el) {
    const figure = JSON.parse(el.nextElementSibling.textContent);
    el.replaceChildren();  // the placeholder line
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

  // One figure per task (plotly's loading is a task of its own): the page stays responsive while
  // they are drawn.
  function next() {
    if (drawing || !queue.length) return;
    drawing = true;
    loadPlotly().then(function () {
      const el = queue.shift();
      return el && el.dataset.drawn === "queued" ? draw(el) : null;
    }, function (error) {  // plotly did not load: none of the queue can be drawn now
      console.error(error);
      notDrawn(queue.splice(0).filter(function (el) { return el.dataset.drawn === "queued"; }));
    }).catch(function (error) { console.error(error); })
      .then(function () { drawing = false; setTimeout(next, 0); });
  }

  // At least half of the figure in the window (or half the window, for a figure taller than it).
  function mostlyInView(rect) {
    const shown = Math.min(rect.bottom, window.innerHeight) - Math.max(rect.top, 0);
    return shown >= Math.min(rect.height, window.innerHeight) / 2;
  }

  function start() {
    const plots = Array.from(document.querySelectorAll(".plot"));
    if (!plots.length) return;
    if (!("IntersectionObserver" in window)) {
      plots.forEach(enqueue);
      return;
    }
    // Near the window on load but not mostly in it: drawn at the reader's first move, not while the
    // page loads.
    const nearOnLoad = [];
    let loading = true;
    observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        observer.unobserve(entry.target);
        if (loading && !mostlyInView(entry.boundingClientRect)) nearOnLoad.push(entry.target);
        else enqueue(entry.target);
      });
      loading = false;
    }, { rootMargin: NEAR });
    plots.forEach(function (el) { observer.observe(el); });
    function moved() {
      MOVES.forEach(function (type) { window.removeEventListener(type, moved); });
      nearOnLoad.splice(0).forEach(enqueue);
    }
    MOVES.forEach(function (type) { window.addEventListener(type, moved, { passive: true }); });
  }

  // Printing (or saving as PDF) draws every figure first, at once: a printed dashboard is complete
  // even where the reader never scrolled. Plotly lays a figure out synchronously in newPlot; were
  // plotly not loaded yet (no figure drawn, no move since the page opened), the figures are drawn as
  // soon as it is, and this print shows their placeholder lines and the tables.
  window.addEventListener("beforeprint", function () {
    const undrawn = Array.from(document.querySelectorAll(".plot")).filter(function (el) {
      return el.dataset.drawn !== "yes" && el.dataset.drawn !== "printing";
    });
    undrawn.forEach(function (el) { el.dataset.drawn = "printing"; });
    const drawAll = function () {
      undrawn.forEach(function (el) { draw(el).catch(function (error) { console.error(error); }); });
    };
    if (window.Plotly) drawAll();
    else if (undrawn.length) {
      loadPlotly().then(drawAll, function (error) {
        console.error(error);
        notDrawn(undrawn.filter(function (el) { return el.dataset.drawn === "printing"; }));
      });
    }
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
