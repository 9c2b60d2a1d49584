"""The drawable picture every output format shares: positioned, sized, coloured nodes.

A scene is a JSON-ready dict built from what the ``graph`` operation returned and the
layout's positions. The HTML page embeds it, the SVG and GraphML writers read it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: Cluster colours, largest shown cluster first (Tableau 20, reordered for contrast).
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#86bcb6", "#d37295", "#8cd17d", "#b6992d", "#499894",
    "#fabfd2", "#a0cbe8", "#ffbe7d", "#f1ce63", "#d4a6c8", "#79706e",
)  # fmt: skip
UNASSIGNED_COLOUR = "#9e9e9e"
CUE_COLOUR = "#555555"
SIZE_BY = ("importance", "access")
MIN_RADIUS, MAX_RADIUS, CUE_RADIUS = 3.0, 12.0, 2.0


def colours(clusters: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Cluster id -> colour: palette order by how many memories are shown (ties by id);
    the palette repeats past 20 clusters, the unassigned ones (-1) are grey."""
    order = sorted((c for c in clusters if c["id"] >= 0), key=lambda c: (-c["shown"], c["id"]))
    out = {c["id"]: PALETTE[i % len(PALETTE)] for i, c in enumerate(order)}
    out[-1] = UNASSIGNED_COLOUR
    return out


def radii(nodes: Sequence[Mapping[str, Any]], size_by: str) -> list[float]:
    """A radius per memory from its importance (0-1) or its access count (log scale,
    relative to the most accessed memory shown)."""
    if size_by == "access":
        top = max((math.log1p(n["access_count"]) for n in nodes), default=0.0) or 1.0
        scale = [math.log1p(n["access_count"]) / top for n in nodes]
    else:
        scale = [min(1.0, max(0.0, float(n["importance"]))) for n in nodes]
    return [round(MIN_RADIUS + (MAX_RADIUS - MIN_RADIUS) * s, 2) for s in scale]


def build_scene(
    data: Mapping[str, Any], positions: Sequence[tuple[float, float]], size_by: str
) -> dict[str, Any]:
    """The scene: memories and cues with x, y (0-1), r and colour; edges as index
    pairs (memories first, then cues); the legend; and the counts shown."""
    nodes, cues = data["nodes"], data["cues"]
    colour = colours(data["clusters"])
    index = {n["id"]: i for i, n in enumerate(nodes)}
    index.update({"cue:" + c["id"]: len(nodes) + i for i, c in enumerate(cues)})
    memories = [
        {**n, "x": x, "y": y, "r": r, "colour": colour.get(n["cluster"], UNASSIGNED_COLOUR)}
        for n, (x, y), r in zip(nodes, positions, radii(nodes, size_by), strict=False)
    ]
    cue_nodes = [
        {**c, "x": x, "y": y, "r": CUE_RADIUS, "colour": CUE_COLOUR}
        for c, (x, y) in zip(cues, positions[len(nodes) :], strict=False)
    ]
    return {
        "memories": memories,
        "cues": cue_nodes,
        "associations": [[index[a], index[b], w] for a, b, w in data["associations"]],
        "cue_edges": [[index[e], index["cue:" + c]] for e, c in data["cue_edges"]],
        "legend": [
            {**c, "colour": colour.get(c["id"], UNASSIGNED_COLOUR)}
            for c in sorted(data["clusters"], key=lambda c: (c["id"] < 0, -c["shown"], c["id"]))
        ],
        "size_by": size_by,
        "total_memories": data["total_memories"],
        "candidates": data["candidates"],
        "limit": data["limit"],
        "limited": data["limited"],
        "filters": data["filters"],
        "caption": caption(data),
    }


def caption(data: Mapping[str, Any]) -> str:
    """One line on what the picture shows, saying when it was limited."""
    shown, total = len(data["nodes"]), data["total_memories"]
    parts = [f"{shown:,} memories"]
    filters = data["filters"]
    if filters.get("around"):
        parts.append(f"within {filters['hops']} hops of {filters['around']}")
    if filters.get("cluster") is not None:
        parts.append(f"of cluster {filters['cluster']}")
    parts.append(f"of {total:,} in the store")
    text = " ".join(parts)
    if data["limited"]:
        text += (
            f"; limited to the {data['limit']:,} strongest of {data['candidates']:,} "
            "(importance × decay × access; --limit shows more)"
        )
    return text
