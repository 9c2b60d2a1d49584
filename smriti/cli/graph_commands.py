"""``smriti graph`` and ``smriti clusters``: see the memory.

``graph OUT`` draws the user's memories as a self-contained HTML page (or SVG, GraphML,
JSON): memories coloured by Leiden cluster and sized by importance or access count,
their cues, their associations, a search box and a legend naming each cluster by its
most specific cues. The store (or its owner process) only selects the subgraph; the
layout and drawing happen in this process. ``clusters`` lists the clusters.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from smriti.cli import output
from smriti.cli.commands import open_memory


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti graph`` and ``smriti clusters`` on ``sub``."""
    from smriti.graphview import DEFAULT_LIMIT
    from smriti.graphview.render import FORMATS
    from smriti.graphview.scene import SIZE_BY

    p = sub.add_parser(
        "graph",
        parents=[common],
        help="draw the memory graph as a page you open in a browser",
        description="Draw memories (coloured by cluster, sized by importance or access), "
        "their cues and associations to OUT: a self-contained HTML page with a search box "
        "and a cluster legend (no network needed), or SVG, GraphML or JSON. Large stores "
        f"are drawn as their {DEFAULT_LIMIT} strongest memories (importance x decay x "
        "access) unless --limit says otherwise; the page and the output say so.",
    )
    p.add_argument("out", metavar="OUT", help="the file to write (.html, .svg, .graphml, .json)")
    p.add_argument("--format", choices=FORMATS, default=None, help="default: from OUT's suffix")
    p.add_argument("--size-by", choices=SIZE_BY, default="importance", help="node size")
    p.add_argument("--cluster", type=int, default=None, metavar="N", help="only cluster N")
    p.add_argument("--around", default=None, metavar="ID", help="a memory and its neighbourhood")
    p.add_argument("--hops", type=_hops, default=2, help="steps from --around (default 2)")
    p.add_argument(
        "--limit",
        type=_limit,
        default=DEFAULT_LIMIT,
        help=f"at most this many memories, the strongest (default {DEFAULT_LIMIT})",
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=graph_command)

    p = sub.add_parser(
        "clusters",
        parents=[common],
        help="the memory clusters: size, top cues, a sample memory",
        description="List the Leiden clusters of the user's memories, largest first, each "
        "with its size, the cues most specific to it and its strongest memory "
        "(cluster -1 holds memories not yet clustered; consolidation assigns them).",
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=clusters_command)


def graph_command(args: argparse.Namespace) -> int:
    """Select, lay out and write the picture; print what was drawn."""
    from smriti import validation
    from smriti.graphview.render import format_for, write_picture
    from smriti.requests import GraphRequest

    path = validation.output_file(args.out)  # before the store is opened
    fmt = format_for(path, args.format)
    request = GraphRequest.parse(args.cluster, args.around, args.hops, args.limit)
    started = time.perf_counter()
    with open_memory(args, "graph") as memory:
        data = memory.run(request)
        user = memory.user
    selected = time.perf_counter() - started
    written = write_picture(data, path, fmt, args.size_by, f"Smriti memory of {user}")
    report = {
        "path": str(written.path),
        "format": written.format,
        "bytes": written.bytes,
        "memories": len(data["nodes"]),
        "cues": len(data["cues"]),
        "associations": len(data["associations"]),
        "cue_edges": len(data["cue_edges"]),
        "clusters": len(data["clusters"]),
        "total_memories": data["total_memories"],
        "candidates": data["candidates"],
        "limit": data["limit"],
        "limited": data["limited"],
        "seconds": {
            "select": round(selected, 3),
            "layout": written.layout_seconds,
            "render": written.render_seconds,
        },
    }
    output.emit(report, args.json, _format_graph)
    return 0


def _format_graph(d: dict[str, Any]) -> str:
    line = (
        f"wrote {d['path']} ({d['format']}, {d['bytes'] / 1024:,.0f} KB): {d['memories']:,} "
        f"memories of {d['total_memories']:,}, {d['cues']:,} cues, {d['associations']:,} "
        f"associations, {_count(d['clusters'], 'cluster')}"
    )
    if d["limited"]:
        line += (
            f"\nlimited to the {d['limit']:,} strongest of {d['candidates']:,} memories "
            "(importance x decay x access); --limit N draws more"
        )
    return line


def clusters_command(args: argparse.Namespace) -> int:
    """Print the cluster table."""
    from smriti.requests import ClustersRequest

    with open_memory(args, "clusters") as memory:
        data = memory.run(ClustersRequest())
    output.emit(data, args.json, _format_clusters)
    return 0


def _format_clusters(d: dict[str, Any]) -> str:
    if not d["clusters"]:
        return "no memories"
    rows = [
        (
            "unassigned" if c["id"] < 0 else c["id"],
            c["size"],
            ", ".join(c["top_cues"]) or "-",
            output.snippet(c["sample"]["summary"], 60),
        )
        for c in d["clusters"]
    ]
    table = output.table(("CLUSTER", "MEMORIES", "TOP CUES", "SAMPLE"), rows)
    memories = _count(d["total_memories"], "memory", "memories")
    return f"{table}\n{_count(len(d['clusters']), 'cluster')}, {memories}"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _limit(text: str) -> int:
    return _bounded(text, 1, 100_000)


def _hops(text: str) -> int:
    return _bounded(text, 0, 5)


def _bounded(text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {value}")
    return value
