"""GraphML of the scene, written by igraph: opens in Gephi, yEd, Cytoscape, igraph."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import igraph

from smriti.graphview.text import printable


def write_graphml(scene: Mapping[str, Any], path: Path) -> None:
    """Write ``scene`` to ``path``: one vertex per memory and per cue (attribute
    ``kind``), association and cue edges (``kind``, ``weight``), with the layout's
    ``x``/``y``, cluster, figures and colour."""
    memories, cues = scene["memories"], scene["cues"]
    graph = igraph.Graph(n=len(memories) + len(cues), directed=False)
    graph.vs["name"] = [m["id"] for m in memories] + ["cue:" + c["id"] for c in cues]
    graph.vs["kind"] = ["memory"] * len(memories) + ["cue"] * len(cues)
    graph.vs["label"] = [printable(m["summary"]) for m in memories] + [
        printable(c["name"]) for c in cues
    ]
    graph.vs["cluster"] = [m["cluster"] for m in memories] + [-1] * len(cues)
    for key in ("importance", "decay", "access_count"):
        graph.vs[key] = [float(m[key]) for m in memories] + [0.0] * len(cues)
    graph.vs["x"] = [float(n["x"]) * 1000 for n in [*memories, *cues]]
    graph.vs["y"] = [float(n["y"]) * 1000 for n in [*memories, *cues]]
    graph.vs["colour"] = [n["colour"] for n in [*memories, *cues]]
    edges: list[tuple[int, int]] = [(a, b) for a, b, _ in scene["associations"]]
    edges += [(a, b) for a, b in scene["cue_edges"]]
    graph.add_edges(edges)
    graph.es["kind"] = ["association"] * len(scene["associations"]) + ["cue"] * len(
        scene["cue_edges"]
    )
    graph.es["weight"] = [float(w) for _, _, w in scene["associations"]] + [1.0] * len(
        scene["cue_edges"]
    )
    graph.write_graphml(str(path))
