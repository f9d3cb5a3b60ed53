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
