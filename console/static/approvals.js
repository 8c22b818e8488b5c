// Approvals: every second, fetch the queue and merge it into the page:
// new calls are added, calls no longer waiting are removed, and the ones
// still waiting are left alone, so a reason being typed keeps its focus.
(function () {
  "use strict";
  var wrap = document.getElementById("queue-wrap");
  if (!wrap || !window.fetch || !window.DOMParser) return;
  function list() { return wrap.querySelector("ul.queue"); }
  function merge(html) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.querySelector("ul.queue");
    var ul = list();
    if (!fresh || !ul) return;
    var want = {};
    Array.prototype.forEach.call(fresh.children, function (li) { want[li.id] = li; });
    Array.prototype.slice.call(ul.children).forEach(function (li) {
      // A call being decided here is left to its own answer: removing
      // it would drop the "Approved by …" notice htmx is about to put in.
      if (li.classList.contains("pending") && !want[li.id] && !li.querySelector(".htmx-request")) li.remove();
    });
    Object.keys(want).forEach(function (id) {
      if (!document.getElementById(id)) {
        var li = document.importNode(want[id], true);
        ul.appendChild(li);
        if (window.htmx) window.htmx.process(li);
      }
    });
    var none = document.getElementById("no-pending");
    var waiting = ul.querySelector("li.pending") !== null;
    if (none) none.hidden = waiting;
    var err = doc.querySelector(".error");
    wrap.dataset.error = err ? err.textContent : "";
  }
  function poll() {
    fetch(wrap.dataset.poll, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(merge)
      .catch(function () {})
      .then(function () { setTimeout(poll, 1000); });
  }
  setTimeout(poll, 1000);
})();
