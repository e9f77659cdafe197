/* Copy buttons: <button data-copy="#input-id"> copies that field's value to the clipboard and says
   so in the element its aria-describedby names. Falls back to selecting the text (the reader
   presses Ctrl+C) where the Clipboard API is not allowed (plain http on another host). */
(function () {
  "use strict";

  function say(button, text) {
    var id = button.getAttribute("aria-describedby");
    var status = id && document.getElementById(id);
    if (status) status.textContent = text;
  }

  function selectAll(field) {
    field.focus();
    field.select();
    if (field.setSelectionRange) field.setSelectionRange(0, field.value.length);
  }

  function legacyCopy(field) {
    selectAll(field);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-copy]");
    if (!button) return;
    var field = document.querySelector(button.getAttribute("data-copy"));
    if (!field) return;
    var done = function () { say(button, "Copied to the clipboard."); };
    var manual = function () {
      if (legacyCopy(field)) { done(); return; }
      selectAll(field);
      say(button, "Selected: press Ctrl+C (⌘C) to copy.");
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(done, manual);
    } else {
      manual();
    }
  });

  document.addEventListener("focusin", function (evt) {
    var field = evt.target;
    if (field && field.matches && field.matches("[data-select-on-focus]")) field.select();
  });
})();
