"""How the CLI prints: JSON for scripts (``--json``), aligned text for people."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

SNIPPET_CHARS = 72


def emit(data: Any, as_json: bool, formatter: Callable[[Any], str]) -> None:
    """Print ``data`` as JSON or through ``formatter``, to stdout."""
    if as_json:
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    else:
        text = formatter(data)
    sys.stdout.write(text + ("\n" if text and not text.endswith("\n") else ""))
    sys.stdout.flush()


def snippet(text: str, width: int = SNIPPET_CHARS) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns; the last column is not padded."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers) - 1)]
    lines = []
    for row in cells:
        padded = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return "\n".join(lines)


def format_mapping(data: Mapping[str, Any]) -> str:
    """``key  value`` lines, keys aligned."""
    if not data:
        return ""
    width = max(len(str(k)) for k in data)
    return "\n".join(f"{str(k).ljust(width)}  {_value(v)}" for k, v in data.items())


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def format_stored(data: Mapping[str, Any]) -> str:
    """A stored memory: id, type, importance, summary, cues."""
    cues = ", ".join(f"{c['name']} ({c['type']})" for c in data.get("cues", []))
    lines = {
        "stored": data["id"],
        "type": data["memory_type"],
        "importance": f"{float(data['importance']):.2f}",
        "summary": snippet(data["summary"], 200),
        "tags": ", ".join(data.get("tags", [])) or "-",
        "cues": cues or "-",
        "associations": data.get("associations", 0),
    }
    return format_mapping(lines)


def recall_data(query: str, mode: str, found: Mapping[str, Any]) -> dict[str, Any]:
    """The ``recall --json`` document: the MCP tool's fields, ``degraded`` and ``warning``.

    ``found`` is what the recall operation returns. In list mode ``score`` is null: the
    order is by last access, and the recency number behind it says nothing a reader
    can use.
    """
    items = [dict(r) for r in found["results"]]
    if mode == "list":
        for item in items:
            item["score"] = None
    data: dict[str, Any] = {"query": query, "mode": mode, "count": len(items), "results": items}
    data["degraded"] = bool(found.get("degraded"))
    if data["degraded"]:
        data["warning"] = str(found.get("warning", ""))
    return data


def format_recall(data: Mapping[str, Any]) -> str:
    """Recall results as a table: score, match type, hop, id, text.

    List mode shows when each memory was last used instead: it has no match to score.
    """
    results = data["results"]
    if not results:
        return "no memories found"
    if data.get("mode") == "list":
        rows = [(_minute(r["last_accessed_at"]), r["id"], _memory(r)) for r in results]
        return table(("LAST USED", "ID", "MEMORY"), rows)
    rows = [(f"{r['score']:.3f}", r["match_type"], r["hop"], r["id"], _memory(r)) for r in results]
    return table(("SCORE", "MATCH", "HOP", "ID", "MEMORY"), rows)


def _memory(result: Mapping[str, Any]) -> str:
    return snippet(result["summary"] or result["content"])


def _minute(timestamp: str) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM`` (UTC, as stored)."""
    return str(timestamp)[:16].replace("T", " ")


def format_sync(data: Mapping[str, Any]) -> str:
    """A sync report."""
    pushed = data.get("pushed") or []
    head = f"{data['provider']}: pushed {len(pushed)}, skipped {data.get('skipped', 0)}"
    return head + (f"\n{data['message']}" if data.get("message") else "")


def format_plugins(data: Mapping[str, Any]) -> str:
    """Plugins table, then load failures."""
    rows = []
    for p in data["plugins"]:
        kinds = "; ".join(f"{k}: {', '.join(v)}" for k, v in p["registers"].items())
        rows.append((p["name"], p["distribution"], p["version"], kinds or "-"))
    parts = [table(("PLUGIN", "DISTRIBUTION", "VERSION", "REGISTERS"), rows)]
    if data["failures"]:
        parts.append("\nfailed to load:")
        parts += [f"  {name}: {error}" for name, error in sorted(data["failures"].items())]
    if data.get("registry_error"):
        parts.append(f"\nerror: {data['registry_error']}")
    return "\n".join(parts)
