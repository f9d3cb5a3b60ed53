// Let HTMX swap 422 and 409 responses (form errors rendered by the server, e.g. a name already
// used) instead of ignoring them.
document.addEventListener("DOMContentLoaded", function () {
  if (window.htmx) {
    htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "422", swap: true, error: false },
      { code: "409", swap: true, error: false },
      { code: "[45]..", swap: false, error: true },
    ];
  }
});

// Search page and New-concept form: put the caret on the character where the expression is wrong,
// once, when the error arrives. Not on other swaps (the completion's options arrive while the user
// types: moving the caret then would put the next keystroke inside the expression).
function markExpressionError(event) {
  var at = document.querySelector("mark.err-at[data-offset]");
  var box = document.getElementById("q") || document.getElementById("expression");
  if (!at || !box) return;
  var settled = event && event.type === "htmx:afterSettle" ? event.target : null;
  if (settled instanceof Element && !settled.contains(at)) return;
  var pos = parseInt(at.dataset.offset, 10);
  box.focus();
  box.setSelectionRange(pos, pos + 1);
}
document.addEventListener("DOMContentLoaded", markExpressionError);
document.addEventListener("htmx:afterSettle", markExpressionError);

// Search results: a note's excerpt shows its first five lines (.doc-text clips) and the server starts it
// near the matched segment, counting line breaks; on a narrow cell long lines wrap and can still push the
// segment below the fifth line. Scroll each such excerpt until its marked segment shows: all of it, or its
// start at the top where it is taller than the box.
function revealMarkedSegments() {
  document.querySelectorAll(".doc-text").forEach(function (box) {
    var mark = box.querySelector("mark");
    if (!mark || box.scrollHeight <= box.clientHeight) return;
    var b = box.getBoundingClientRect(), m = mark.getBoundingClientRect();
    if (m.bottom > b.bottom + 1) {
      box.scrollTop += Math.max(0, Math.min(m.bottom - b.bottom, m.top - b.top));
    } else if (m.top < b.top) {  // scrolled before a resize that unwrapped it
      box.scrollTop -= b.top - m.top;
    }
  });
}
document.addEventListener("DOMContentLoaded", revealMarkedSegments);
document.addEventListener("htmx:afterSettle", revealMarkedSegments);
window.addEventListener("load", revealMarkedSegments);
window.addEventListener("resize", revealMarkedSegments);
