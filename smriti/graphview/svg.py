"""A static SVG picture of the scene (no script): for documents and slides."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from smriti.graphview.text import printable

SIZE, PAD, LEGEND_W = 1000, 40, 360


def render_svg(scene: Mapping[str, Any], title: str) -> str:
    """The SVG document for ``scene``: edges, cues, memories (each with its summary as
    a tooltip), and the legend on the right."""
    nodes = [*scene["memories"], *scene["cues"]]
    width, height = SIZE + 2 * PAD + LEGEND_W, SIZE + 2 * PAD
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f"<title>{_text(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#fcfcfc"/>',
        _edges(nodes, scene["cue_edges"], "#c8c8c8", 0.5),
        _edges(nodes, scene["associations"], "#8a8a8a", 0.8),
    ]
    for cue in scene["cues"]:
        out.append(
            f'<circle cx="{_x(cue)}" cy="{_y(cue)}" r="{cue["r"]}" fill="#555">'
            f"<title>cue: {_text(cue['name'])}</title></circle>"
        )
    for m in scene["memories"]:
        out.append(
            f'<circle cx="{_x(m)}" cy="{_y(m)}" r="{m["r"]}" fill="{m["colour"]}" '
            f'stroke="#fff" stroke-width="0.8"><title>{_text(m["summary"])}</title></circle>'
        )
    out += _legend(scene, title)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _legend(scene: Mapping[str, Any], title: str) -> list[str]:
    x = SIZE + 2 * PAD
    out = [
        f'<text x="{x}" y="{PAD}" font-size="18">{_text(title)}</text>',
        f'<text x="{x}" y="{PAD + 22}" font-size="13">{len(scene["memories"]):,} memories</text>',
    ]
    y = PAD + 50
    for item in scene["legend"][:40]:
        out.append(f'<circle cx="{x + 5}" cy="{y - 4}" r="5" fill="{item["colour"]}"/>')
        label = f"{item['label']} ({item['shown']}/{item['size']})"
        out.append(f'<text x="{x + 16}" y="{y}" font-size="11">{_text(label[:60])}</text>')
        y += 16
    return out


def _edges(nodes: list[Mapping[str, Any]], pairs: list[list[Any]], colour: str, w: float) -> str:
    d = "".join(
        f"M{_x(nodes[p[0]])} {_y(nodes[p[0]])}L{_x(nodes[p[1]])} {_y(nodes[p[1]])}" for p in pairs
    )
    return f'<path d="{d}" stroke="{colour}" stroke-opacity="0.5" stroke-width="{w}" fill="none"/>'


def _x(node: Mapping[str, Any]) -> str:
    return f"{PAD + float(node['x']) * SIZE:.1f}"


def _y(node: Mapping[str, Any]) -> str:
    return f"{PAD + float(node['y']) * SIZE:.1f}"


def _text(value: object) -> str:
    return escape(printable(str(value)), quote=True)
