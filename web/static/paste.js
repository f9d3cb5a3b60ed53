// Paste a note (partials/_paste_result.html): a marked clause shows its own features in the panel under the
// text when it is hovered, focused or clicked (Enter or Space on a focused one); the last one shown stays.
(function () {
  function show(mark) {
    var result = mark.closest(".paste-result");
    if (!result) return;
    result.querySelectorAll("mark.paste-clause").forEach(function (m) {
      m.classList.toggle("is-active", m === mark);
    });
    result.querySelectorAll(".clause-panel").forEach(function (panel) {
      panel.hidden = panel.dataset.clause !== mark.dataset.clause;
    });
  }
  function clauseOf(event) {
    return event.target instanceof Element ? event.target.closest("mark.paste-clause") : null;
  }
  ["mouseover", "focusin", "click"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var mark = clauseOf(event);
      if (mark) show(mark);
    });
  });
  document.addEventListener("keydown", function (event) {
    var mark = clauseOf(event);
    if (mark && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      show(mark);
    }
  });
  document.addEventListener("htmx:afterSettle", function (event) {  // a new answer: its first clause shown
    var first = event.target instanceof Element ? event.target.querySelector("mark.paste-clause") : null;
    if (first) first.classList.add("is-active");
  });
})();
