// The rater's page without reloads: keys 0-3 pick a grade (on a page comparing two answers,
// A, B or T pick a side or a tie; on a page asking whether two texts say the same, Y, P or N
// answer yes, partly or no, and E goes to the note), Enter saves and shows the next item, U
// undoes, F flags, N goes to the note. The server stores each rating before it
// answers with the next item, so closing the tab loses nothing; the form also works
// without this script (it posts and the server redirects back).
(function () {
  "use strict";
  const app = document.getElementById("rate-app");
  const form = document.getElementById("rate-form");
  if (!app || !form) return;
  const $ = (id) => document.getElementById(id);
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  const pairwise = Boolean(document.getElementById("pair-choice"));
  const contentCheck = Boolean(document.getElementById("content-choice"));
  let shownAt = performance.now();
  let busy = false;

  function showError(text) {
    const box = $("rate-error");
    box.textContent = text || "";
    box.hidden = !text;
  }

  // keepInputs: the server refused the submission and answered with the same item; the
  // rater's grade, note, flag and clock stay as they were, for them to correct.
  function render(view, keepInputs) {
    $("rate-done").textContent = view.done;
    $("rate-assigned").textContent = view.assigned;
    $("rate-seconds").textContent = view.seconds_spent;
    $("rate-undo").disabled = !view.can_undo;
    const item = view.item;
    form.hidden = !item;
    $("rate-finished").hidden = !!item;
    if (!item) return;
    if (keepInputs && String(item.assignment) === $("rate-assignment").value) return;
    $("rate-assignment").value = item.assignment;
    // textContent, never innerHTML: the texts are interview words and predicted answers, not markup.
    $("rate-question").textContent = item.question;
    if (!contentCheck) $("rate-reference").textContent = item.reference;  // a content check shows none
    if (contentCheck) {
      $("rate-what").textContent = item.what;
      $("rate-original").textContent = item.original;
      $("rate-rewritten").textContent = item.rewritten;
    } else if (pairwise) {
      $("rate-answer-a").textContent = item.answer_a;
      $("rate-answer-b").textContent = item.answer_b;
    } else {
      $("rate-answer").textContent = item.answer;
    }
    form.querySelectorAll("input[name=grade], input[name=preference], input[name=same_content]").forEach((r) => { r.checked = false; });
    $("rate-note").value = "";
    $("rate-flag").checked = false;
    $("rate-flag-reason").value = "";
    // Leave the note or flag-reason field (the keys that got there are not pressed again):
    // while a text field has focus, 0-3 would type into it instead of choosing a grade.
    if (form.contains(document.activeElement)) document.activeElement.blur();
    shownAt = performance.now();
    window.scrollTo(0, 0);
  }

  async function post(url, body) {
    if (busy) return;  // one request at a time: Enter held down must not submit twice
    busy = true;
    try {
      const response = await fetch(url, {
        method: "POST", body: body, credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRFToken": csrf },
      });
      let data = {};
      try { data = await response.json(); } catch (e) { data = { error: "The server answered " + response.status + "." }; }
      if (data.item !== undefined) render(data, Boolean(data.error));
      showError(data.error);
    } catch (e) {
      showError("Not saved: the server cannot be reached. Your rating is still on the page; press Enter to try again.");
    } finally {
      busy = false;
    }
  }

  function submit() {
    $("rate-seconds-input").value = ((performance.now() - shownAt) / 1000).toFixed(2);
    post(app.dataset.submitUrl, new FormData(form));
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); submit(); });
  document.getElementById("undo-form").addEventListener("submit", (event) => {
    event.preventDefault();
    post(app.dataset.undoUrl, new FormData(event.target));
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const typing = event.target.matches("input[type=text], textarea");
    if (event.key === "Enter") {
      if (!form.hidden) { event.preventDefault(); submit(); }
      return;
    }
    if (event.key === "Escape" && typing) { event.target.blur(); return; }
    if (typing) return;
    const side = { a: "pref-a", b: "pref-b", t: "pref-tie" }[event.key.toLowerCase()];
    const same = { y: "same-yes", p: "same-partly", n: "same-no" }[event.key.toLowerCase()];
    const noteKey = contentCheck ? "e" : "n";  // N answers "no" on a content check
    if (contentCheck && same && !form.hidden) {
      $(same).checked = true;
      event.preventDefault();
    } else if (pairwise && side && !form.hidden) {
      $(side).checked = true;
      event.preventDefault();
    } else if (!pairwise && !contentCheck && /^[0-3]$/.test(event.key) && !form.hidden) {
      $("grade-" + event.key).checked = true;
      event.preventDefault();
    } else if (event.key === "u" || event.key === "U") {
      if (!$("rate-undo").disabled) post(app.dataset.undoUrl, new FormData(document.getElementById("undo-form")));
    } else if (event.key === "f" || event.key === "F") {
      $("rate-flag").checked = !$("rate-flag").checked;
      if ($("rate-flag").checked) { $("rate-flag-reason").focus(); event.preventDefault(); }
    } else if (event.key.toLowerCase() === noteKey) {
      $("rate-note").focus();
      event.preventDefault();
    }
  });
})();
