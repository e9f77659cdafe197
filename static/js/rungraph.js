/* The run page: the run graph's Fit / + / − zoom, kept across live updates; the steps an operator
   opened stay open, and a running step's log shows its newest lines, when a push swaps them in.
   Progressive: without it the graph wraps inside its box at 100 % and the steps read the same. */
(function () {
  "use strict";
  var MIN = 0.4, MAX = 1.6, STEP = 0.15, FIT_STEP = 0.05;
  var mode = "fit";  // "fit": the largest zoom (at most 100 %) that shows the whole graph; "manual"
  var level = 1;
  var chosen = {};  // step row id -> open, as the operator left it

  function fits(view) {
    return view.scrollHeight <= view.clientHeight + 1 && view.scrollWidth <= view.clientWidth + 1;
  }

  function fitLevel(view, dag) {
    for (var z = 1; z > MIN; z = Math.round((z - FIT_STEP) * 100) / 100) {
      dag.style.setProperty("--dag-zoom", String(z));
      if (fits(view)) return z;
    }
    return MIN;
  }

  function applyZoom() {
    var section = document.getElementById("instance-dag");
    if (!section) return;
    var view = section.querySelector("[data-dag-view]");
    var dag = section.querySelector(".dag");
    var tools = section.querySelector("[data-dag-tools]");
    if (!view || !dag) return;
    if (tools) tools.hidden = false;
    if (mode === "fit") level = fitLevel(view, dag);
    dag.style.setProperty("--dag-zoom", String(level));
    var shown = section.querySelector("[data-dag-level]");
    if (shown) shown.textContent = Math.round(level * 100) + "%";
    section.querySelectorAll("[data-dag-zoom]").forEach(function (b) {
      var how = b.getAttribute("data-dag-zoom");
      if (how === "fit") b.setAttribute("aria-pressed", mode === "fit" ? "true" : "false");
      if (how === "in") b.disabled = level >= MAX;
      if (how === "out") b.disabled = level <= MIN;
    });
  }

  function restoreSteps() {
    Object.keys(chosen).forEach(function (id) {
      var el = document.getElementById(id);
      if (el && el.open !== chosen[id]) el.open = chosen[id];
    });
    document.querySelectorAll(".steplog[data-running] .steplog-lines").forEach(function (pre) {
      pre.scrollTop = pre.scrollHeight;
    });
  }

  var pending = false;
  function refresh() {  // once per frame, however many fragments a push swapped in
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      applyZoom();
      restoreSteps();
    });
  }

  document.addEventListener("click", function (evt) {
    var b = evt.target.closest && evt.target.closest("[data-dag-zoom]");
    if (!b) return;
    var how = b.getAttribute("data-dag-zoom");
    if (how === "fit") {
      mode = "fit";
    } else {
      mode = "manual";
      level = Math.min(MAX, Math.max(MIN, Math.round((level + (how === "in" ? STEP : -STEP)) * 100) / 100));
    }
    applyZoom();
  });
  document.addEventListener("toggle", function (evt) {
    var el = evt.target;
    if (el && el.tagName === "DETAILS" && el.id && el.id.indexOf("step-") === 0) chosen[el.id] = el.open;
  }, true);
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(applyZoom, 120);
  });
  document.addEventListener("DOMContentLoaded", refresh);
  document.addEventListener("htmx:wsAfterMessage", refresh);
  document.addEventListener("htmx:afterSwap", refresh);
  document.addEventListener("htmx:oobAfterSwap", refresh);
})();
