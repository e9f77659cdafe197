/* Runledger: times in the reader's time zone, the live connection indicator, websocket resume,
   and confirm dialogs loaded by htmx. Everything here is progressive: pages read without it. */
(function () {
  "use strict";

  // ---- times -------------------------------------------------------------------------------
  var rtf = window.Intl && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  var abs = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  var UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];

  function relative(date) {
    var diff = (date.getTime() - Date.now()) / 1000;
    if (Math.abs(diff) < 5) return "just now";
    for (var i = 0; i < UNITS.length; i++) {
      var u = UNITS[i];
      if (Math.abs(diff) >= u[1] || u[0] === "second") {
        var v = Math.round(diff / u[1]);
        return rtf ? rtf.format(v, u[0]) : (Math.abs(v) + " " + u[0] + (Math.abs(v) === 1 ? "" : "s") + (v < 0 ? " ago" : " from now"));
      }
    }
    return "";
  }

  // "Show exact times": every relative time on the page reads absolute, with its time zone;
  // the choice is kept for the next pages (localStorage), the hover shows the other form.
  var EXACT_KEY = "runledger.exactTimes";
  function exactTimes() {
    try { return localStorage.getItem(EXACT_KEY) === "1"; } catch (e) { return false; }
  }
  function syncToggles() {
    var on = exactTimes();
    document.querySelectorAll("[data-time-toggle]").forEach(function (b) {
      b.setAttribute("aria-pressed", on ? "true" : "false");
      b.textContent = on ? "Show relative times" : "Show exact times";
    });
  }
  document.addEventListener("click", function (evt) {
    var b = evt.target.closest && evt.target.closest("[data-time-toggle]");
    if (!b) return;
    try { localStorage.setItem(EXACT_KEY, exactTimes() ? "0" : "1"); } catch (e) { /* private mode */ }
    syncToggles();
    renderTimes(document);
  });

  // The navigation's "More" menu closes on a click elsewhere and on Escape.
  document.addEventListener("click", function (evt) {
    document.querySelectorAll("details.navmore[open]").forEach(function (d) {
      if (!d.contains(evt.target)) d.removeAttribute("open");
    });
  });
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape") return;
    document.querySelectorAll("details.navmore[open]").forEach(function (d) {
      d.removeAttribute("open");
      var s = d.querySelector("summary");
      if (s) s.focus();
    });
  });

  function renderTimes(root) {
    var exact = exactTimes();
    (root || document).querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      var absolute = abs.format(d);
      if (el.dataset.format === "absolute" || exact) {
        el.textContent = absolute;
        el.title = relative(d);
      } else {
        el.textContent = relative(d);
        el.title = absolute;
      }
    });
  }
  window.runledgerRenderTimes = renderTimes;

  // ---- live connection: indicator + resume from the last event id ----------------------------
  var lastEventId = null;

  function setIndicator(state, text) {
    var el = document.getElementById("live-indicator");
    if (!el) return;
    el.className = "live live-" + state;
    var t = el.querySelector(".live-text");
    if (t) t.textContent = text;
  }

  function trackCursor(root) {
    // The server stamps every push with the id of the last history row it covered.
    var cursor = (root || document).querySelector("[data-live-cursor]");
    if (cursor) {
      var id = parseInt(cursor.getAttribute("data-live-cursor"), 10);
      if (!isNaN(id) && (lastEventId === null || id > lastEventId)) lastEventId = id;
    }
  }

  function installSocketFactory() {
    if (!window.htmx) return;
    // htmx-ext-ws reconnects with the URL it first read; rewrite `after` so a reconnecting page
    // asks only for what it has not seen yet (the server replays the gap from the history table).
    htmx.createWebSocket = function (url) {
      try {
        var u = new URL(url, location.href);
        if (lastEventId !== null) u.searchParams.set("after", String(lastEventId));
        url = u.toString();
      } catch (e) { /* keep url */ }
      setIndicator("connecting", "connecting");
      var ws = new WebSocket(url);
      ws.binaryType = "blob";
      return ws;
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    syncToggles();
    renderTimes(document);
    var live = document.getElementById("rl-live");
    if (live) {
      var a = new URL(live.getAttribute("ws-connect"), location.href).searchParams.get("after");
      if (a) lastEventId = parseInt(a, 10);
    }
    setInterval(function () { renderTimes(document); }, 30000);
  });
  // Scripts are deferred in order: htmx, the ws extension, then this file.
  installSocketFactory();

  document.addEventListener("htmx:wsOpen", function () { setIndicator("on", "live"); });
  document.addEventListener("htmx:wsClose", function () { setIndicator("off", "reconnecting"); });
  document.addEventListener("htmx:wsError", function () { setIndicator("off", "offline"); });
  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var m = /data-live-cursor="(\d+)"/.exec(evt.detail.message || "");
    if (m) {
      var id = parseInt(m[1], 10);
      if (lastEventId === null || id > lastEventId) lastEventId = id;
    }
  });
  document.addEventListener("htmx:wsAfterMessage", function () { renderTimes(document); });
  document.addEventListener("htmx:afterSwap", function (evt) { syncToggles(); renderTimes(evt.target); });
  document.addEventListener("htmx:oobAfterSwap", function (evt) {
    var t = evt.detail && evt.detail.target;
    if (t) { syncToggles(); renderTimes(t); trackCursor(t); }
  });

  // ---- confirm dialogs: action forms are fetched into #rl-dialog-body ------------------------
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (evt.target && evt.target.id === "rl-dialog-body") {
      var dlg = document.getElementById("rl-dialog");
      if (dlg && !dlg.open) dlg.showModal();
      var first = evt.target.querySelector("textarea, input:not([type=hidden]), select, button");
      if (first) first.focus();
    }
  });
  // A refused action (400: the form is invalid; 409: the engine said no) comes back as the
  // dialog with its errors: swap it in like a success, so the dialog keeps its instance and action.
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var t = evt.detail.target;
    var code = evt.detail.xhr && evt.detail.xhr.status;
    if (t && t.id === "rl-dialog-body" && (code === 400 || code === 409 || code === 422)) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });
  document.addEventListener("click", function (evt) {
    var close = evt.target.closest && evt.target.closest("[data-close-dialog]");
    if (close) {
      evt.preventDefault();
      var dlg = close.closest("dialog");
      if (dlg) dlg.close();
    }
  });

  // ---- small-multiple charts: one column on a narrow screen -------------------------------
  // A chart of several small plots in a grid (the budget burn-down) is laid out two abreast
  // for a wide page; below 560 px its titles and ticks would overprint, so it stacks them.
  function fitGrids(root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll("[data-narrow-one-column] .js-plotly-plot").forEach(function (el) {
      var grid = el.layout && el.layout.grid;
      if (!grid) return;
      if (!el.dataset.wideColumns) {
        el.dataset.wideColumns = grid.columns;
        el.dataset.wideRows = grid.rows;
        el.dataset.wideHeight = el.layout.height;
      }
      var cols = +el.dataset.wideColumns, rows = +el.dataset.wideRows;
      var narrow = el.clientWidth < 560;
      var want = narrow ? 1 : cols;
      if (grid.columns === want) return;
      var plots = (el.layout.annotations || []).length || cols * rows;
      var wantRows = narrow ? plots : rows;
      var perRow = (+el.dataset.wideHeight) / rows;
      window.Plotly.relayout(el, {"grid.columns": want, "grid.rows": wantRows,
                                  height: Math.max(200, Math.round(perRow * wantRows))});
    });
  }
  var fitTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(fitTimer);
    fitTimer = setTimeout(function () { fitGrids(document); }, 150);
  });
  document.addEventListener("DOMContentLoaded", function () { fitGrids(document); });
  document.addEventListener("htmx:afterSwap", function (evt) { fitGrids(evt.target); });

  // ---- the workflow's step graph: fitted to its box, or at its actual size -----------------
  // CSS scales the graph down to its box; when that shrank it, a toggle offers the actual size
  // (the box then scrolls). The choice is kept when a live update swaps the graph in again.
  var wfdagActual = false;
  function wfdagTools(root) {
    (root || document).querySelectorAll("[data-wfdag-wrap]").forEach(function (wrap) {
      var svg = wrap.querySelector("svg.wfdag");
      var tools = wrap.parentNode.querySelector("[data-wfdag-tools]");
      if (!svg || !tools) return;
      if (wfdagActual) wrap.setAttribute("data-actual", ""); else wrap.removeAttribute("data-actual");
      var natural = +svg.getAttribute("width");
      var box = wrap.clientWidth - 16;  // its padding
      tools.hidden = !(natural > box);
      var b = tools.querySelector("[data-wfdag-actual]");
      if (b) b.setAttribute("aria-pressed", wfdagActual ? "true" : "false");
      var said = tools.querySelector(".muted");
      if (said) said.textContent = wfdagActual ? "actual size: scroll the box to move around"
        : "scaled to " + Math.round(100 * box / natural) + "% to fit";
    });
  }
  document.addEventListener("click", function (evt) {
    var b = evt.target.closest && evt.target.closest("[data-wfdag-actual]");
    if (!b) return;
    wfdagActual = !wfdagActual;
    wfdagTools(document);
  });
  document.addEventListener("DOMContentLoaded", function () { wfdagTools(document); });
  document.addEventListener("htmx:afterSwap", function () { wfdagTools(document); });
  window.addEventListener("resize", function () { wfdagTools(document); });

  // ---- filter forms: the URL the page already shows is not asked for again ----------------
  // Typing in a search field asks for the filtered list after a pause; leaving the field then
  // fires `change`, which would ask for the same URL and push it into the history a second time.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    var info = evt.detail && evt.detail.pathInfo;
    if (!elt || !elt.matches || !elt.matches("form.filters[hx-push-url]") || !info || !info.finalRequestPath) return;
    var url = new URL(info.finalRequestPath, window.location.href);
    if (url.pathname === window.location.pathname && url.search === window.location.search) evt.preventDefault();
  });
})();
