/* Keyboard navigation on lists: j / k move a visible focus between the rows of the page's list
   (the first table marked data-keynav, else the first data table whose rows link somewhere),
   Enter opens the focused row's link, / jumps to the page's filter or search field.
   Keys typed into a field, or with Ctrl/Alt/Meta, are left alone. */
(function () {
  "use strict";

  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  function rows() {
    var tables = Array.prototype.slice.call(document.querySelectorAll("main table[data-keynav]"));
    if (!tables.length) tables = Array.prototype.slice.call(document.querySelectorAll("main table.data"));
    for (var i = 0; i < tables.length; i++) {
      var linked = Array.prototype.filter.call(tables[i].querySelectorAll("tbody tr"), function (tr) {
        return tr.querySelector("a[href]") && tr.offsetParent !== null;
      });
      if (linked.length) return linked;
    }
    return [];
  }

  function mark(list, index) {
    list.forEach(function (tr) { tr.classList.remove("keynav-current"); });
    var tr = list[index];
    if (!tr.hasAttribute("tabindex")) tr.setAttribute("tabindex", "-1");
    tr.setAttribute("data-keynav-row", "");
    tr.classList.add("keynav-current");
    tr.focus({ preventScroll: true });
    tr.scrollIntoView({ block: "nearest" });
  }

  function searchField() {
    return document.querySelector(
      "main input[type=search], main input[name=q], main form[method=get] input[type=text], main form[role=search] input");
  }

  /* A table that scrolls sideways (phone widths) and holds nothing focusable cannot be scrolled
     from the keyboard: give it a tab stop of its own (WCAG 2.1.1; axe "scrollable-region-focusable"). */
  function scrollablesFocusable() {
    Array.prototype.forEach.call(document.querySelectorAll("main table.data, main .table-wrap"), function (el) {
      var scrolls = el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible";
      if (scrolls && !el.querySelector("a[href], button, input, select, textarea, [tabindex]")) {
        el.setAttribute("tabindex", "0");
      }
    });
  }
  document.addEventListener("DOMContentLoaded", scrollablesFocusable);
  document.addEventListener("htmx:afterSettle", scrollablesFocusable);
  window.addEventListener("resize", scrollablesFocusable);

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.altKey || ev.metaKey || typing(ev.target)) return;
    if (document.querySelector("dialog[open]")) return;
    var list;
    if (ev.key === "j" || ev.key === "k") {
      list = rows();
      if (!list.length) return;
      var at = list.indexOf(document.activeElement.closest ? document.activeElement.closest("tr") : null);
      var next = at < 0 ? (ev.key === "j" ? 0 : list.length - 1)
                        : Math.max(0, Math.min(list.length - 1, at + (ev.key === "j" ? 1 : -1)));
      mark(list, next);
      ev.preventDefault();
    } else if (ev.key === "Enter" && document.activeElement && document.activeElement.hasAttribute("data-keynav-row")) {
      var link = document.activeElement.querySelector("a.rowlink[href]") || document.activeElement.querySelector("a[href]");
      if (link) { link.click(); ev.preventDefault(); }
    } else if (ev.key === "/") {
      var field = searchField();
      if (field) { field.focus(); if (field.select) field.select(); ev.preventDefault(); }
    }
  });
})();
