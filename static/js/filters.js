// A filter form shows the values of the list it filters, after any navigation.
//
// htmx swaps only the results and pushes the URL; when the browser goes Back, htmx restores a
// snapshot of the page whose form holds the *attributes* it was first rendered with, not the
// values the user had chosen since (and a page from the bfcache keeps whatever the user typed
// last). So after every history restore and every page show, each control of a
// form[data-sync-url] is set from the URL's query: the URL is the one source of truth.
(function () {
  "use strict";

  function syncForm(form) {
    var params = new URLSearchParams(window.location.search);
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.type === "submit" || el.type === "button") return;
      var values = params.getAll(el.name);
      if (el.type === "checkbox" || el.type === "radio") {
        el.checked = values.indexOf(el.value) !== -1;
      } else if (el.tagName === "SELECT" && el.multiple) {
        Array.prototype.forEach.call(el.options, function (o) { o.selected = values.indexOf(o.value) !== -1; });
      } else if (el.tagName === "SELECT") {
        el.value = values.length ? values[0] : (el.dataset.default || "");
        if (el.selectedIndex === -1) el.selectedIndex = 0;
      } else {
        el.value = values.join(" ");
      }
    });
    form.querySelectorAll("[data-summary-of]").forEach(function (out) {
      var picked = params.getAll(out.dataset.summaryOf);
      out.textContent = picked.length ? picked.join(", ") : (out.dataset.empty || "any");
    });
  }

  function syncAll() {
    document.querySelectorAll("form[data-sync-url]").forEach(syncForm);
  }

  function summarise(evt) {
    var form = evt.target.closest && evt.target.closest("form[data-sync-url]");
    if (!form || evt.target.type !== "checkbox") return;
    var name = evt.target.name;
    var out = form.querySelector('[data-summary-of="' + name + '"]');
    if (!out) return;
    var picked = Array.prototype.filter.call(form.elements, function (el) {
      return el.name === name && el.checked;
    }).map(function (el) { return el.value; });
    out.textContent = picked.length ? picked.join(", ") : (out.dataset.empty || "any");
  }

  document.addEventListener("htmx:historyRestore", syncAll);
  window.addEventListener("popstate", function () { setTimeout(syncAll, 0); });
  window.addEventListener("pageshow", syncAll);
  document.addEventListener("change", summarise);
})();
