// The labelling page (/concepts/{id}/label): y positive, n negative, s skip, u undo, ? the keys; the buttons do the
// same. The next note is already on the page, hidden: an answer shows it at once and posts in the background; the
// response brings the note after it (hidden in turn) and the counts and estimate (out of band). Keys pressed while
// a request is out wait their turn, in order.
(function () {
  "use strict";
  var KEYS = { y: "positive", n: "negative", s: "skip", u: "undo", "?": "help" };
  var root = null;
  var busy = false;
  var waiting = [];
  var answered = []; // notes answered on this page, last last: what `u` undoes

  function byId(id) { return document.getElementById(id); }
  function noteIn(box) { return box ? box.querySelector("article.label-note") : null; }
  function itemOf(el) {
    return { document_id: el.dataset.documentId, lease_id: el.dataset.leaseId || "",
             reason: el.dataset.reason || "", probability: el.dataset.probability || "" };
  }
  function prefixed(prefix, item) {
    var out = {};
    Object.keys(item).forEach(function (k) { out[prefix + k] = item[k]; });
    return out;
  }
  function url(action) { return "/concepts/" + root.dataset.conceptId + "/label/" + action; }

  function takeQueued() {
    var li = byId("queue-rest").querySelector("li");
    if (!li) return null;
    li.remove();
    return itemOf(li);
  }
  function putBackQueued(item) {
    var li = document.createElement("li");
    li.dataset.documentId = item.document_id;
    li.dataset.leaseId = item.lease_id;
    li.dataset.reason = item.reason;
    li.dataset.probability = item.probability;
    byId("queue-rest").prepend(li);
  }
  function showMessage(box, text) {
    var p = document.createElement("p");
    p.className = "muted";
    p.textContent = text;
    box.replaceChildren(p);
  }

  // The shown slot empty and the next one ready (the first answer's note arrived, or an undo failed): show it.
  function promote() {
    var current = byId("note-current"), next = byId("note-next");
    var waitingNote = noteIn(next);
    if (!noteIn(current) && waitingNote) current.replaceChildren(waitingNote);
    if (!noteIn(current) && !busy) showMessage(current, "No note left to label in this batch.");
  }

  function post(action, values, target) {
    busy = true;
    root.dataset.busy = "true";
    byId("label-flash").replaceChildren();
    return htmx.ajax("POST", url(action), { source: root, target: target, swap: "innerHTML", values: values })
      .catch(function () { showMessage(byId("label-flash"), "The server did not answer: reload the page."); })
      .finally(function () {
        busy = false;
        root.dataset.busy = "false";
        promote();
        if (waiting.length) act(waiting.shift());
      });
  }

  function answer(label) {
    var current = noteIn(byId("note-current"));
    if (!current) return;
    var item = itemOf(current);
    var shown = noteIn(byId("note-next"));
    var values = Object.assign({ label: label, shown: shown ? shown.dataset.documentId : "" }, item);
    var after = takeQueued();
    if (after) Object.assign(values, prefixed("next_", after));
    answered.push(item);
    if (shown) byId("note-current").replaceChildren(shown);
    else showMessage(byId("note-current"), "Fetching the next note…");
    window.scrollTo(0, 0);
    post("answer", values, "#note-next");
  }

  function undo() {
    var last = answered.pop();
    if (!last) {
      showMessage(byId("label-flash"), "Nothing to undo on this page.");
      return;
    }
    var current = noteIn(byId("note-current")), next = noteIn(byId("note-next"));
    if (next) putBackQueued(itemOf(next));
    if (current) byId("note-next").replaceChildren(current);
    else byId("note-next").replaceChildren();
    showMessage(byId("note-current"), "Undoing…");
    post("undo", last, "#note-current");
  }

  function toggleHelp() {
    var help = byId("label-help");
    help.hidden = !help.hidden;
  }

  function act(action) {
    if (action === "help") return toggleHelp();
    if (busy) {
      waiting.push(action);
      return;
    }
    if (action === "undo") undo();
    else answer(action);
  }

  document.addEventListener("DOMContentLoaded", function () {
    root = byId("labeller");
    if (!root || !byId("note-current")) return;
    root.querySelectorAll("button[data-action]").forEach(function (button) {
      button.addEventListener("click", function () { act(button.dataset.action); });
    });
    document.addEventListener("keydown", function (event) {
      var target = event.target;
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
      var action = KEYS[event.key];
      if (!action) return;
      event.preventDefault();
      act(action);
    });
  });
})();
