// Refreshes the run page's progress block every 2 s from its JSON endpoint
// (experiments.web.runs.views.run_progress_json), until the run is finished.
// The block's markup comes from the server (run_progress_block.html), so the page and
// the refresh can never disagree about what is shown to whom.
(function () {
  "use strict";
  var INTERVAL_MS = 2000;
  var block = document.getElementById("run-progress");
  if (!block || block.dataset.finished === "true") {
    return;
  }
  var timer = null;

  function stop() {
    if (timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  }

  function refresh() {
    fetch(block.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        // Logged out (redirected to the login page) or access removed: stop asking.
        if (!response.ok || response.redirected) {
          stop();
          return null;
        }
        return response.json();
      })
      .then(function (data) {
        if (!data) {
          return;
        }
        block.innerHTML = data.html;
        if (data.finished) {
          stop();
          // The analysis and final tables appear with the finished page.
          window.location.reload();
        }
      })
      .catch(function () {
        // A network blip: the next tick tries again.
      });
  }

  timer = setInterval(refresh, INTERVAL_MS);
})();
