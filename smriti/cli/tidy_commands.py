"""``smriti duplicates`` and ``smriti merge``: tidying up look-alike and stale memories.

The store keeps every memory that differs from the ones before it, even by one word
(``smriti.engine.duplicates``); these commands show the groups of memories that closely
resemble each other, and those never recalled in a long time, and fold a group into
the one memory to keep (``smriti.engine.tidy``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from smriti.cli import output
from smriti.cli.commands import _push_backup, open_memory


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti duplicates`` and ``smriti merge`` on ``sub``."""
    p = sub.add_parser(
        "duplicates",
        parents=[common],
        help="groups of near-duplicate memories, and stale ones",
        description="List groups of current memories that closely resemble each other "
        "(cosine at or above --threshold; default DEDUP_THRESHOLD), largest first, and "
        "memories never recalled in --stale-days days. Fold a group with `smriti merge`.",
    )
    p.add_argument("--threshold", type=float, default=None, help="cosine, 0.5-1.0")
    p.add_argument("--limit", type=int, default=20, help="groups shown (default 20)")
    p.add_argument("--stale-days", type=int, default=30, help="days (default 30)")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=duplicates)

    p = sub.add_parser(
        "merge",
        parents=[common],
        help="fold memories into one you keep",
        description="Merge the memories OTHER into the memory ID: it takes their cues, "
        "associations, tags, the highest importance and their recall counts; they stay "
        "as its history (superseded, out of recall, shown by `smriti history ID`).",
    )
    p.add_argument("memory_id", metavar="ID", help="the memory to keep")
    p.add_argument("others", metavar="OTHER", nargs="+", help="the memories to fold into it")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=merge)


def duplicates(args: argparse.Namespace) -> int:
    """Print the near-duplicate groups and the stale memories."""
    from smriti.requests import DuplicatesRequest

    request = DuplicatesRequest.parse(args.threshold, args.limit, args.stale_days)
    with open_memory(args, "duplicates") as memory:
        data = memory.run(request)
    output.emit(data, args.json, format_duplicates)
    return 0


def merge(args: argparse.Namespace) -> int:
    """Merge the memories and print the survivor."""
    from smriti.requests import MergeRequest

    request = MergeRequest.parse(args.memory_id, list(args.others))
    with open_memory(args, "merge") as memory:
        data = memory.run(request)
        _push_backup(memory)
    output.emit(data, args.json, format_merged)
    return 0


def format_duplicates(data: Mapping[str, Any]) -> str:
    """One table per group (newest first), then the stale memories."""
    parts: list[str] = []
    for number, group in enumerate(data["groups"], 1):
        parts.append(f"group {number} (closest pair {float(group['similarity']):.3f}):")
        parts.append(_table(group["memories"]))
    if not data["groups"]:
        parts.append(f"no near-duplicates at {data['threshold']} or above")
    elif data["more_groups"]:
        parts.append(f"... and {data['more_groups']} more group(s) (--limit)")
    if data["stale"]:
        parts.append(f"never recalled in {data['stale_days']} days:")
        parts.append(_table(data["stale"]))
    if data["groups"]:
        parts.append("fold a group into the memory to keep: smriti merge ID OTHER...")
    return "\n".join(parts)


def format_merged(data: Mapping[str, Any]) -> str:
    """Which memories went into which."""
    kept = data["memory"]
    merged = ", ".join(data["merged"])
    return f"merged {merged} into {kept['id']}: {output.snippet(kept['summary'])}"


def _table(memories: list[Mapping[str, Any]]) -> str:
    rows = [
        (str(m["created_at"])[:10], str(m["access_count"]), m["id"], output.snippet(m["summary"]))
        for m in memories
    ]
    return output.table(("CREATED", "RECALLS", "ID", "MEMORY"), rows)
