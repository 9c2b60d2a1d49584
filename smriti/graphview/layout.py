"""Positions for the selected graph, computed with igraph.

Memories and cues are one graph. Association edges pull by their strength, harder
inside a cluster (``SAME_CLUSTER``), so clusters show as regions; a cue edge pulls by
``CUE_EDGE_WEIGHT`` divided by the cue's degree in the picture, so a cue most memories
share does not drag them all into one knot. Fruchterman-Reingold for up to ``FR_MAX_NODES`` nodes,
DrL above (it scales to tens of thousands). The layout is seeded, so the same
selection gives the same picture.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import igraph

FR_MAX_NODES = 3000
CUE_EDGE_WEIGHT = 2.0
SAME_CLUSTER, OTHER_CLUSTER = 3.0, 0.5
SEED = 7


def layout(data: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(x, y) in [0, 1] for every memory of ``data["nodes"]``, then every cue of
    ``data["cues"]``, in that order (``data`` as the ``graph`` operation returns it)."""
    ids = [n["id"] for n in data["nodes"]] + ["cue:" + c["id"] for c in data["cues"]]
    if not ids:
        return []
    index = {key: i for i, key in enumerate(ids)}
    cluster = {n["id"]: n["cluster"] for n in data["nodes"]}
    degree = {c["id"]: max(1, int(c["memories"])) for c in data["cues"]}
    edges: list[tuple[int, int]] = []
    weights: list[float] = []
    for a, b, w in data["associations"]:
        edges.append((index[a], index[b]))
        same = cluster[a] == cluster[b] and cluster[a] >= 0
        weights.append(max(float(w), 0.05) * (SAME_CLUSTER if same else OTHER_CLUSTER))
    for engram_id, cue_id in data["cue_edges"]:
        edges.append((index[engram_id], index["cue:" + cue_id]))
        weights.append(CUE_EDGE_WEIGHT / degree[cue_id])
    graph = igraph.Graph(n=len(ids), edges=edges)
    return _normalised(_positions(graph, weights))


def _positions(graph: igraph.Graph, weights: Sequence[float]) -> list[list[float]]:
    rng = random.Random(SEED)
    igraph.set_random_number_generator(rng)
    try:
        start = [[rng.uniform(-1, 1), rng.uniform(-1, 1)] for _ in range(graph.vcount())]
        if graph.vcount() <= FR_MAX_NODES:
            found = graph.layout_fruchterman_reingold(
                weights=list(weights) or None, niter=500, seed=start, grid="nogrid"
            )
        else:
            found = graph.layout_drl(weights=list(weights) or None, seed=start)
    finally:
        igraph.set_random_number_generator(random)
    return [list(p) for p in found.coords]


def _normalised(coords: list[list[float]]) -> list[tuple[float, float]]:
    xs = [p[0] for p in coords]
    ys = [p[1] for p in coords]
    x0, y0 = min(xs), min(ys)
    span = max(max(xs) - x0, max(ys) - y0) or 1.0
    return [
        (round((x - x0) / span, 5), round((y - y0) / span, 5)) for x, y in zip(xs, ys, strict=True)
    ]
