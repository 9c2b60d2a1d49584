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
    """A stored memory: id, type, importance, summary, cues; whether it repeated an
    existing memory, which ones it closely resembles and which it may contradict."""
    cues = ", ".join(f"{c['name']} ({c['type']})" for c in data.get("cues", []))
    lines = {
        ("already stored" if data.get("deduplicated") else "stored"): data["id"],
        "type": data["memory_type"],
        "importance": f"{float(data['importance']):.2f}",
        "summary": snippet(data["summary"], 200),
        "tags": ", ".join(data.get("tags", [])) or "-",
        "cues": cues or "-",
        "associations": data.get("associations", 0),
        "origin": _origin(data),
    }
    near = data.get("near_duplicates") or []
    if near:
        lines["resembles"] = ", ".join(
            f"{c['id']} ({float(c['similarity']):.2f}: {snippet(c['summary'], 40)})" for c in near
        )
    conflicts = data.get("possible_conflicts") or []
    if conflicts:
        lines["may conflict with"] = ", ".join(
            f"{c['id']} ({snippet(c['summary'], 40)})" for c in conflicts
        )
    hidden = data.get("redacted") or []
    if hidden:  # kinds only: the secrets themselves were never stored
        lines["redacted"] = ", ".join(
            r["kind"] + (f" x{r['count']}" if r["count"] > 1 else "") for r in hidden
        )
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
    data["next_cursor"] = found.get("next_cursor") or None
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
        rows = [(_minute(r["last_accessed_at"]), r["id"], _said(r), _memory(r)) for r in results]
        text = table(("LAST USED", "ID", "ORIGIN", "MEMORY"), rows)
        cursor = data.get("next_cursor")
        return text + (f"\nnext page: --cursor {cursor}" if cursor else "")
    rows = [
        (f"{r['score']:.3f}", r["match_type"], r["hop"], r["id"], _said(r), _memory(r))
        for r in results
    ]
    return table(("SCORE", "MATCH", "HOP", "ID", "ORIGIN", "MEMORY"), rows)


def format_memory(memory: Mapping[str, Any]) -> str:
    """One memory: id, content and its fields, with its version links when it has any."""
    lines: dict[str, Any] = {
        "id": memory["id"],
        "content": memory["content"],
        "type": memory["memory_type"],
        "importance": f"{float(memory['importance']):.2f}",
        "tags": list(memory.get("tags", [])),
        "source": memory.get("source") or "-",
        "created": _minute(memory["created_at"]),
        "last used": _minute(memory["last_accessed_at"]),
        "accessed": memory.get("access_count", 0),
        "decay": memory.get("decay_factor"),
        "cluster": memory.get("cluster_id"),
        "origin": _origin(memory),
    }
    if memory.get("flags"):
        lines["flags"] = "; ".join(f"{f['kind']} ({f['reason']})" for f in memory["flags"])
    if memory.get("supersedes"):
        lines["supersedes"] = memory["supersedes"]
    if memory.get("superseded_by"):
        when = _minute(memory.get("superseded_at") or "")
        lines["superseded by"] = f"{memory['superseded_by']} ({when})"
    return format_mapping(lines)


def format_detail(data: Mapping[str, Any]) -> str:
    """``smriti get``: the memory, then its cues, versions and associations."""
    cues = ", ".join(f"{c['name']} ({c['type']})" for c in data.get("cues", []))
    parts = [format_memory(data["memory"]), f"cues: {cues or '-'}"]
    versions = data.get("versions") or []
    if len(versions) > 1:
        parts.append("versions (oldest first): " + ", ".join(versions))
    links = data.get("associations") or []
    if links:
        rows = [
            (
                a["direction"],
                a["relation"],
                f"{float(a['strength']):.3f}",
                a["id"],
                snippet(a["summary"]),
            )
            for a in links
        ]
        parts.append(table(("DIR", "RELATION", "STRENGTH", "ID", "MEMORY"), rows))
    return "\n".join(parts)


def format_corrected(data: Mapping[str, Any]) -> str:
    """``smriti correct``: which version replaced which, then the new one."""
    head = f"corrected {data['superseded']} -> {data['new_id']}"
    return head + "\n" + format_stored(data["memory"])


def format_history(data: Mapping[str, Any]) -> str:
    """``smriti history``: the versions as a table, oldest first, then the memories
    merged into them."""
    rows = [(_minute(v["created_at"]), v["id"], _memory(v)) for v in data["versions"]]
    text = table(("CREATED", "ID", "MEMORY"), rows)
    merged = data.get("merged") or []
    if merged:
        rows = [(_minute(m["created_at"]), m["id"], _memory(m)) for m in merged]
        text += "\nmerged into it:\n" + table(("CREATED", "ID", "MEMORY"), rows)
    return text


def format_related(data: Mapping[str, Any]) -> str:
    """``smriti related``: relation, strength, the cue it went through, id, text."""
    related = data["related"]
    if not related:
        return f"nothing related to {data['memory_id']}"
    rows = [
        (
            r["relation"],
            f"{float(r['strength']):.3f}",
            r.get("via") or "-",
            r["id"],
            snippet(r["summary"]),
        )
        for r in related
    ]
    return table(("RELATION", "STRENGTH", "VIA", "ID", "MEMORY"), rows)


def _memory(result: Mapping[str, Any]) -> str:
    # Flagged content reads as an instruction to a model: marked, shown as data.
    mark = "[instruction?] " if result.get("flags") else ""
    return mark + snippet(result["summary"] or result["content"])


def _origin(memory: Mapping[str, Any]) -> str:
    """Who said it, and the authenticated caller when there was one; "unknown" for a
    memory stored before origins were recorded."""
    said = memory.get("origin") or "unknown"
    return f"{said} ({memory['principal']})" if memory.get("principal") else said


def _said(result: Mapping[str, Any]) -> str:
    return result.get("origin") or "-"


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
