// The task page: j/k through the explorer's filtered list, ? for the keys, words
// shared with the real answer marked on demand, a condition's evidence highlighted inside the
// transcript, and an in-page search of the transcript. No library; the page works without it.
(function () {
  "use strict";
  var nav = document.getElementById("task-nav");
  var help = document.getElementById("keys-help");
  var keysButton = document.getElementById("keys-button");
  var sharedButton = document.getElementById("shared-words");
  var source = document.getElementById("evidence-source");
  var search = document.getElementById("transcript-search");
  var hits = document.getElementById("transcript-hits");
  var STOP = new Set("a an and are as at be but by for from had has have i if in is it its me my of on or so that the this to was we were with you".split(" "));

  function toggleHelp(show) {
    if (!help) return;
    help.hidden = show === undefined ? !help.hidden : !show;
    if (keysButton) keysButton.setAttribute("aria-expanded", String(!help.hidden));
  }
  if (keysButton) keysButton.addEventListener("click", function () { toggleHelp(); });

  function words(text) {
    return (text.toLowerCase().match(/[a-z0-9']+/g) || []).filter(function (w) { return w.length > 1 && !STOP.has(w); });
  }

  // Words of each answer shared with the real answer, wrapped in <mark> (and unwrapped again).
  var reference = document.getElementById("task-reference");
  var shared = reference ? new Set(words(reference.textContent)) : new Set();
  var originals = new Map();
  function markShared(on) {
    document.querySelectorAll(".answer-text").forEach(function (el) {
      if (!originals.has(el)) originals.set(el, el.textContent);
      var text = originals.get(el);
      if (!on) { el.textContent = text; return; }
      el.textContent = "";
      text.split(/([A-Za-z0-9']+)/).forEach(function (part) {
        if (shared.has(part.toLowerCase()) && part.length > 1) {
          var mark = document.createElement("mark");
          mark.className = "shared";
          mark.textContent = part;
          el.appendChild(mark);
        } else {
          el.appendChild(document.createTextNode(part));
        }
      });
    });
  }
  if (sharedButton) sharedButton.addEventListener("click", function () {
    var on = sharedButton.getAttribute("aria-pressed") !== "true";
    sharedButton.setAttribute("aria-pressed", String(on));
    markShared(on);
  });

  // A condition's evidence: its sentences inside the transcript.
  function showSource() {
    var key = source ? source.value : "";
    document.querySelectorAll("#task-transcript .sentence").forEach(function (el) {
      var kept = key && (" " + el.dataset.kept).indexOf(" " + key + " ") !== -1;
      el.classList.toggle("evidence", Boolean(kept));
    });
    var first = document.querySelector("#task-transcript .sentence.evidence");
    if (first) first.scrollIntoView({ block: "nearest" });
  }
  if (source) source.addEventListener("change", showSource);

  // In-page search: turns without the text are dimmed, the count announced.
  function searchTranscript() {
    var needle = search.value.trim().toLowerCase();
    var count = 0;
    document.querySelectorAll("#task-transcript .turn").forEach(function (turn) {
      var found = needle && turn.textContent.toLowerCase().indexOf(needle) !== -1;
      turn.classList.toggle("search-hit", Boolean(found));
      turn.classList.toggle("search-miss", Boolean(needle) && !found);
      if (found) count += 1;
    });
    hits.textContent = needle ? count + " turn" + (count === 1 ? "" : "s") + " match" : "";
  }
  if (search) search.addEventListener("input", searchTranscript);

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (event.key === "j" && nav && nav.dataset.next) { window.location.href = nav.dataset.next; }
    else if (event.key === "k" && nav && nav.dataset.previous) { window.location.href = nav.dataset.previous; }
    else if (event.key === "?") { toggleHelp(); }
    else if (event.key === "Escape") { toggleHelp(false); }
    else if (event.key === "w" && sharedButton) { sharedButton.click(); }
    else if (event.key === "/" && search) { event.preventDefault(); search.focus(); }
  });
})();
