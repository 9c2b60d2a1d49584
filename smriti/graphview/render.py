"""From the ``graph`` operation's data to a file: layout, scene, one format."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smriti.errors import InvalidInput
from smriti.private import make_private

FORMATS = ("html", "svg", "graphml", "json")


@dataclass(slots=True)
class Written:
    """What ``write_picture`` wrote."""

    path: Path
    format: str
    bytes: int
    layout_seconds: float
    render_seconds: float


def format_for(path: Path, explicit: str | None) -> str:
    """``explicit``, else the one OUT's suffix names (``.svg``, ``.graphml``,
    ``.json``), else html."""
    if explicit:
        if explicit not in FORMATS:
            raise InvalidInput(f"--format must be one of {', '.join(FORMATS)}; got {explicit!r}")
        return explicit
    suffix = path.suffix.lower().lstrip(".")
    return suffix if suffix in FORMATS else "html"


def write_picture(
    data: Mapping[str, Any], path: Path, fmt: str, size_by: str, title: str
) -> Written:
    """Lay out ``data``, build its scene and write it to ``path`` as ``fmt``."""
    from smriti.graphview.layout import layout
    from smriti.graphview.scene import build_scene

    started = time.perf_counter()
    positions = layout(data)
    scene = build_scene(data, positions, size_by)
    laid_out = time.perf_counter()
    make_private(path)  # the picture shows the memories: private like the store
    if fmt == "graphml":
        from smriti.graphview.graphml import write_graphml

        write_graphml(scene, path)
    else:
        path.write_text(_text(scene, fmt, title), encoding="utf-8")
    done = time.perf_counter()
    return Written(
        path, fmt, path.stat().st_size, round(laid_out - started, 3), round(done - laid_out, 3)
    )


def _text(scene: Mapping[str, Any], fmt: str, title: str) -> str:
    if fmt == "html":
        from smriti.graphview.html import render_html

        return render_html(scene, title)
    if fmt == "svg":
        from smriti.graphview.svg import render_svg

        return render_svg(scene, title)
    return json.dumps(scene, ensure_ascii=False, indent=1) + "\n"
