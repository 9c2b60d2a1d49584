// Smriti web page: small conveniences; every page works without them.
// Memory text is never put into the page from here (the server renders it, escaped).
(function () {
  "use strict";
  function ready(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }
  ready(function () {
    // graph: "open this memory" follows the memory the drawing's details show
    var graph = document.getElementById("graph");
    var open = document.getElementById("d-open");
    if (graph && open) {
      graph.addEventListener("click", function () {
        var id = document.getElementById("d-id").textContent;
        if (id) open.href = open.dataset.base + encodeURIComponent(id);
      });
    }
    // tidy: the memory chosen to keep is not also merged into itself
    Array.prototype.forEach.call(document.querySelectorAll("form.group"), function (form) {
      form.addEventListener("change", function (event) {
        if (event.target.name !== "keep") return;
        Array.prototype.forEach.call(form.querySelectorAll("input[name=merge]"), function (box) {
          box.checked = box.value !== event.target.value;
        });
      });
    });
  });
})();
