// Let HTMX swap 422 responses (form errors rendered by the server) instead of ignoring them.
document.addEventListener("DOMContentLoaded", function () {
  if (window.htmx) {
    htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "422", swap: true, error: false },
      { code: "[45]..", swap: false, error: true },
    ];
  }
});
