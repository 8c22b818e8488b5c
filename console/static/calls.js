// Live calls: new audit records arrive as server-sent events and are put
// at the top of the table, built with DOM calls (never innerHTML), so an
// argument can never become markup.
(function () {
  "use strict";
  var table = document.getElementById("calls");
  if (!table || !table.dataset.events || !window.EventSource) return;
  var body = table.tBodies[0];
  var status = document.getElementById("live-status");
  var maxRows = 500;
  // Call pages are under the console's prefix, which the table names.
  var callsBase = table.dataset.calls;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text || "";
    tr.appendChild(td);
    return td;
  }
  function row(c) {
    var tr = document.createElement("tr");
    tr.className = c.outcome + " new";
    var t = new Date(c.time);
    var td = document.createElement("td");
    var a = document.createElement("a");
    a.href = callsBase + c.seq;
    var tm = document.createElement("time");
    tm.dateTime = c.time;
    tm.textContent = pad(t.getHours()) + ":" + pad(t.getMinutes()) + ":" + pad(t.getSeconds());
    a.appendChild(tm);
    td.appendChild(a);
    tr.appendChild(td);
    // An OAuth principal: its subject, the issuer's host beside it, the
    // whole issuer#sub on hover; as the server renders it.
    var pc = cell(tr, c.who && c.who.issuer ? "" : (c.principal || "\u2014"));
    if (c.who && c.who.issuer) {
      var sub = document.createElement("span");
      sub.className = "principal";
      sub.title = c.who.id;
      sub.textContent = c.who.name || c.who.subject;
      var host = document.createElement("small");
      host.className = "issuer";
      host.textContent = c.who.host;
      pc.appendChild(sub);
      pc.appendChild(document.createTextNode(" "));
      pc.appendChild(host);
    }
    cell(tr, c.profile);
    cell(tr, c.client);
    cell(tr, c.tool);
    var oc = cell(tr, "");
    var badge = document.createElement("span");
    badge.className = "badge " + c.outcome;
    badge.textContent = c.outcome;
    oc.appendChild(badge);
    cell(tr, c.duration_ms + " ms", "num");
    var ac = cell(tr, "");
    var code = document.createElement("code");
    code.className = "args";
    var args = JSON.stringify(c.args);
    code.textContent = args.length > 160 ? args.slice(0, 160) + "\u2026" : args;
    ac.appendChild(code);
    return tr;
  }
  var seen = {};
  Array.prototype.forEach.call(body.querySelectorAll("a"), function (a) {
    var href = a.getAttribute("href");
    if (href.indexOf(callsBase) === 0) seen[href.slice(callsBase.length)] = true;
  });
  var count = 0;
  var es = new EventSource(table.dataset.events);
  es.addEventListener("open", function () {
    status.dataset.live = "on";
  });
  es.addEventListener("call", function (ev) {
    var c = JSON.parse(ev.data);
    if (seen[c.seq]) return;
    seen[c.seq] = true;
    body.insertBefore(row(c), body.firstChild);
    while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
    var empty = document.getElementById("empty");
    if (empty) empty.remove();
    count++;
    status.textContent = count + (count === 1 ? " new call" : " new calls") + " since the page loaded; the newest is " + c.tool + " (" + c.outcome + ").";
  });
  es.addEventListener("error", function () {
    status.dataset.live = "off";
  });
})();
