// Smriti graph page: draws the scene embedded in #graph-data as SVG.
// Memory text reaches the DOM only through textContent, never as markup.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var SIZE = 1000, PAD = 40;
  var scene = JSON.parse(document.getElementById("graph-data").textContent);
  var nodes = scene.memories.concat(scene.cues);
  var svg = document.getElementById("graph");
  var view = { x: 0, y: 0, w: SIZE + 2 * PAD, h: SIZE + 2 * PAD };

  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function px(n) { return (PAD + n.x * SIZE).toFixed(1); }
  function py(n) { return (PAD + n.y * SIZE).toFixed(1); }
  function text(id, value) { document.getElementById(id).textContent = value; }

  // one path per edge kind: thousands of edges stay cheap to draw
  function edgePath(pairs, cls) {
    var d = [];
    for (var i = 0; i < pairs.length; i++) {
      var a = nodes[pairs[i][0]], b = nodes[pairs[i][1]];
      d.push("M" + px(a) + " " + py(a) + "L" + px(b) + " " + py(b));
    }
    el("path", { d: d.join(""), "class": cls }, svg);
  }

  var cuesOf = scene.memories.map(function () { return []; });
  scene.cue_edges.forEach(function (e) { cuesOf[e[0]].push(nodes[e[1]].name); });
  var clusterLabel = {};
  scene.legend.forEach(function (c) { clusterLabel[c.id] = c.label; });

  edgePath(scene.cue_edges, "cue-edge");
  edgePath(scene.associations, "assoc-edge");
  var memoryDots = [], cueDots = [];
  // name the cues that name clusters (hub cues sit in the middle and say little)
  var labelled = {};
  scene.legend.forEach(function (c) {
    c.top_cues.slice(0, 2).forEach(function (name) { labelled[name] = true; });
  });
  scene.cues.forEach(function (c) {
    var dot = el("circle", { cx: px(c), cy: py(c), r: c.r, "class": "cue" }, svg);
    el("title", {}, dot).textContent = "cue: " + c.name + " (" + c.memories + " memories)";
    cueDots.push(dot);
  });
  scene.memories.forEach(function (m, i) {
    var dot = el("circle", { cx: px(m), cy: py(m), r: m.r, fill: m.colour, "class": "memory" }, svg);
    el("title", {}, dot).textContent = m.summary;
    dot.addEventListener("click", function () { show(i); });
    memoryDots.push(dot);
  });
  var circles = memoryDots.concat(cueDots); // the order of `nodes`
  scene.cues.forEach(function (c) { // on top of the memories
    if (!labelled[c.name]) return;
    el("text", { x: px(c), y: (py(c) - 4).toFixed(1), "class": "cue-label" }, svg).textContent = c.name;
  });

  function show(i) {
    var m = scene.memories[i];
    text("d-summary", m.summary);
    text("d-id", m.id);
    text("d-cluster", clusterLabel[m.cluster] || String(m.cluster));
    text("d-figures", "importance " + m.importance + " · accessed " + m.access_count +
      "× · decay " + m.decay + (m.hop !== undefined ? " · hop " + m.hop : ""));
    text("d-cues", cuesOf[i].join(", ") || "–");
    document.getElementById("details").hidden = false;
  }

  function highlight(match) {
    var hits = 0;
    svg.classList.toggle("searching", match !== null);
    nodes.forEach(function (n, i) {
      var hit = match !== null && match(n, i);
      circles[i].classList.toggle("hit", hit);
      if (hit && i < scene.memories.length) hits++;
    });
    text("matches", match === null ? "" : hits + " matching memories");
    document.body.dataset.matches = match === null ? "" : String(hits);
  }

  function search(value) {
    var q = value.trim().toLowerCase();
    if (!q) return highlight(null);
    highlight(function (n, i) {
      if (i >= scene.memories.length) return n.name.toLowerCase().indexOf(q) >= 0;
      var hay = (n.summary + " " + n.id + " " + cuesOf[i].join(" ")).toLowerCase();
      return hay.indexOf(q) >= 0;
    });
  }
  var box = document.getElementById("search");
  box.addEventListener("input", function () { search(box.value); });

  var legend = document.getElementById("legend");
  scene.legend.forEach(function (c) {
    var item = document.createElement("li");
    var swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = c.colour;
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(c.label + " (" + c.shown + "/" + c.size + ")"));
    item.addEventListener("click", function () {
      highlight(function (n, i) { return i < scene.memories.length && n.cluster === c.id; });
    });
    legend.appendChild(item);
  });

  function applyView() {
    svg.setAttribute("viewBox", [view.x, view.y, view.w, view.h].join(" "));
  }
  svg.addEventListener("wheel", function (event) {
    event.preventDefault();
    var box = svg.getBoundingClientRect();
    var fx = (event.clientX - box.left) / box.width, fy = (event.clientY - box.top) / box.height;
    var k = event.deltaY > 0 ? 1.15 : 1 / 1.15;
    view.x += view.w * fx * (1 - k); view.y += view.h * fy * (1 - k);
    view.w *= k; view.h *= k;
    applyView();
  }, { passive: false });
  var drag = null;
  svg.addEventListener("mousedown", function (e) { drag = { x: e.clientX, y: e.clientY }; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var box = svg.getBoundingClientRect();
    view.x -= (e.clientX - drag.x) * view.w / box.width;
    view.y -= (e.clientY - drag.y) * view.h / box.height;
    drag = { x: e.clientX, y: e.clientY };
    applyView();
  });
  applyView();

  text("count", scene.memories.length + " memories");
  text("caption", scene.caption);
  document.body.dataset.nodes = String(scene.memories.length);
  document.body.dataset.cues = String(scene.cues.length);
  // page.html#q=words opens with that search (a link that shows something)
  if (location.hash.indexOf("#q=") === 0) {
    box.value = decodeURIComponent(location.hash.slice(3));
    search(box.value);
  }
  document.body.dataset.ready = "1";
})();
