"""The self-contained HTML page: the scene as JSON, drawn by a small script.

Nothing is loaded from the network. Memory text enters the page only inside the JSON
data block, with ``<``, ``>`` and ``&`` written as ``\\u003c``-style escapes, so no
memory can end the script element; the script puts text into the DOM through
``textContent`` only.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

_ESCAPES = str.maketrans(
    {
        "<": "\\u003c",
        ">": "\\u003e",
        "&": "\\u0026",
        "\u2028": "\\u2028",
        "\u2029": "\\u2029",
    }
)

STYLE = """
body { margin: 0; font: 14px system-ui, sans-serif; color: #222; display: flex; height: 100vh; }
main { flex: 1; position: relative; }
#graph { width: 100%; height: 100%; background: #fcfcfc; cursor: grab; display: block; }
aside { width: 320px; overflow-y: auto; padding: 12px 16px; border-left: 1px solid #ddd; }
h1 { font-size: 18px; margin: 0 0 4px; }
#caption { color: #555; font-size: 12px; margin: 0 0 10px; }
#search { width: 100%; box-sizing: border-box; padding: 6px; font-size: 14px; }
#matches { color: #555; font-size: 12px; height: 16px; }
#legend { list-style: none; padding: 0; margin: 8px 0; font-size: 12px; }
#legend li { margin: 3px 0; cursor: pointer; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 50%;
  margin-right: 6px; }
#details { font-size: 12px; border-top: 1px solid #ddd; padding-top: 8px; }
#details dt { color: #777; }
#details dd { margin: 0 0 6px; word-break: break-word; }
.assoc-edge { stroke: #8a8a8a; stroke-opacity: 0.45; stroke-width: 0.8; fill: none; }
.cue-edge { stroke: #c8c8c8; stroke-opacity: 0.5; stroke-width: 0.5; fill: none; }
.memory { stroke: #fff; stroke-width: 0.8; cursor: pointer; }
.cue { fill: #555; }
.cue-label { font-size: 11px; fill: #222; font-weight: 600; text-anchor: middle;
  pointer-events: none; paint-order: stroke; stroke: #fff; stroke-width: 3px; }
.searching circle { opacity: 0.12; }
.searching circle.hit { opacity: 1; stroke: #000; stroke-width: 1.5; }
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body data-nodes="0">
<main><svg id="graph" xmlns="http://www.w3.org/2000/svg" role="img"
  aria-label="memory graph"></svg></main>
<aside>
<h1>{title}</h1>
<p><strong id="count"></strong></p>
<p id="caption"></p>
<input id="search" type="search" placeholder="search memories and cues" autocomplete="off">
<div id="matches"></div>
<ul id="legend"></ul>
<dl id="details" hidden>
<dt>memory</dt><dd id="d-summary"></dd>
<dt>id</dt><dd id="d-id"></dd>
<dt>cluster</dt><dd id="d-cluster"></dd>
<dt>figures</dt><dd id="d-figures"></dd>
<dt>cues</dt><dd id="d-cues"></dd>
</dl>
</aside>
<script type="application/json" id="graph-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside an HTML ``<script>`` element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.translate(_ESCAPES)


def render_html(scene: Mapping[str, Any], title: str) -> str:
    """The whole page for ``scene`` (see ``smriti.graphview.scene``)."""
    script = resources.files("smriti.graphview").joinpath("page.js").read_text(encoding="utf-8")
    return TEMPLATE.format(
        title=html.escape(title),
        style=STYLE,
        data=script_json(scene),
        script=script,
    )
