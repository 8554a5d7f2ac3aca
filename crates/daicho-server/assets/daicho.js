// daicho's pages, live (I2): when the ledger changes, the page shows it without a reload by
// hand. A page a person is typing in is never reloaded under them: a notice says the ledger
// changed and offers the reload. Every form works without this script.
(function () {
  "use strict";
  if (!window.EventSource) return;
  var edited = false;
  document.addEventListener("input", function () { edited = true; });
  document.addEventListener("change", function () { edited = true; });
  var events = new EventSource("/events");
  // A page that is leaving (a form sent, a link followed) never reloads itself on the way.
  var leave = function () { events.close(); };
  document.addEventListener("submit", leave);
  window.addEventListener("pagehide", leave);
  events.addEventListener("change", function () {
    var active = document.activeElement;
    var typing = active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
    if (edited || typing) {
      var notice = document.getElementById("stale");
      if (notice) notice.hidden = false;
      return;
    }
    events.close();
    window.location.reload();
  });
})();
