// The live view: events from /events (server-sent events) and the next context.
// Everything from the agent is put on the page with textContent, never as HTML.
(function () {
  "use strict";
  var list = document.getElementById("events");
  var ctx = document.getElementById("context");
  var status = document.getElementById("status");
  var countEl = document.getElementById("event-count");
  var ctxMeta = document.getElementById("context-meta");
  var MAX_ROWS = 500;
  var seen = 0;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function setStatus(text, cls) {
    status.textContent = text;
    status.className = "badge " + cls;
  }

  function time(ts) {
    var d = new Date(ts * 1000);
    return d.toTimeString().slice(0, 8) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  function addEvent(ev) {
    var li = el("li", "ev g-" + ev.group);
    li.dataset.type = ev.type;
    li.dataset.seq = ev.seq;
    li.appendChild(el("span", "t", time(ev.ts)));
    li.appendChild(el("span", "type", ev.type));
    li.appendChild(el("span", "src", ev.source));
    li.appendChild(el("span", "sum", ev.summary));
    var details = el("details", "raw");
    details.appendChild(el("summary", "", "json"));
    details.appendChild(el("pre", "", JSON.stringify(ev.data, null, 1)));
    li.appendChild(details);
    list.insertBefore(li, list.firstChild);
    while (list.childNodes.length > MAX_ROWS) list.removeChild(list.lastChild);
    seen += 1;
    countEl.textContent = seen + " events";
  }

  function showContext(c) {
    ctx.textContent = "";
    if (c.error) {
      ctx.appendChild(el("li", "empty", "context unavailable: " + c.error));
      return;
    }
    ctxMeta.textContent = c.count + " messages · ~" + c.tokens + " tokens · v" + c.version;
    c.messages.forEach(function (m) {
      var li = el("li", "msg role-" + m.role);
      li.dataset.id = m.id;
      var head = el("div", "head");
      head.appendChild(el("span", "role", m.role + (m.name ? " · " + m.name : "")));
      head.appendChild(el("span", "tok", m.tokens + " tok"));
      li.appendChild(head);
      li.appendChild(el("div", "text", m.text));
      ctx.appendChild(li);
    });
    if (!c.messages.length) ctx.appendChild(el("li", "empty", "(empty)"));
  }

  var source = new EventSource("/events");
  source.onopen = function () { setStatus("live", "ok"); };
  source.onerror = function () { setStatus("reconnecting…", "warn"); };
  source.onmessage = function (m) { addEvent(JSON.parse(m.data)); };
  source.addEventListener("context", function (m) { showContext(JSON.parse(m.data)); });
  source.addEventListener("gap", function (m) {
    var li = el("li", "ev g-error", m.data + " event(s) skipped: this page fell behind");
    list.insertBefore(li, list.firstChild);
  });
  source.addEventListener("closed", function () {
    setStatus("agent stopped", "danger");
    source.close();
  });
})();
