"""The reference MCP memory server's ``memory.jsonl``, both ways (``--from/--to mcp-memory``).

Format followed: ``@modelcontextprotocol/server-memory`` 0.6.3 (modelcontextprotocol/
servers, ``src/memory/index.ts``: ``loadGraph``/``saveGraph``), checked unchanged in
2026.8.31 (whose server wrote the test sample): one JSON object per line, either
``{"type": "entity", "name", "entityType", "observations": [str, ...]}`` or
``{"type": "relation", "from", "to", "relationType"}``; entities are written first.

Import: each observation is one memory, its text kept as it is, with the entity's name
and type as tags (so as cues); an entity without observations becomes one memory
"name (type)". A relation becomes an association, with its relation type, between the
first memories of its two entities. Export writes each current memory as an observation
of an entity (its first tag, or "memory <id>" when it has none; the type is the second
tag of a memory that came from this format, else its memory type) and each association
whose type is not one of Smriti's own as a relation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import InvalidInput
from smriti.importers.records import Imported, Rejected

if TYPE_CHECKING:
    from smriti.engine import Engine

NAME = "mcp-memory"
EXPECTED = (
    'the reference memory server\'s memory.jsonl (JSON lines with "type": "entity" or "relation")'
)
#: Relation types Smriti makes itself; an export leaves them out (they are not the user's).
OWN_RELATIONS = frozenset(
    {"semantic", "follows", "supersedes", "merged", "conflicts", "near_duplicate"}
)


def read(path: Path) -> Iterator[Imported | Rejected]:
    """The memories in ``path``; InvalidInput when it is not a memory.jsonl."""
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file; mcp-memory reads {EXPECTED}")
    entities: list[tuple[int, dict[str, Any]]] = []
    relations: list[tuple[int, dict[str, Any]]] = []
    rejected: list[Rejected] = []
    seen_record = False
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            item, problem = _parse(line)
            if problem is not None:
                if not seen_record:  # the first record decides whether this is the format
                    raise InvalidInput(f"{path} line {number}: {problem}; expected {EXPECTED}")
                rejected.append(Rejected(f"line {number}", problem))
                continue
            seen_record = True
            (entities if item["type"] == "entity" else relations).append((number, item))
    if not seen_record:
        raise InvalidInput(f"{path} holds no records; expected {EXPECTED}")
    yield from rejected
    yield from _records(entities, relations)


def _parse(line: str) -> tuple[dict[str, Any], str | None]:
    """The record on one line, or why it is not one."""
    try:
        item = json.loads(line)
    except ValueError:
        return {}, "not JSON"
    if not isinstance(item, dict) or item.get("type") not in ("entity", "relation"):
        return {}, 'not an object with "type" "entity" or "relation"'
    if item["type"] == "entity":
        if not isinstance(item.get("name"), str) or not item["name"].strip():
            return {}, "an entity without a name"
        observations = item.get("observations", [])
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            return {}, f"entity {item['name']!r}: observations must be a list of strings"
        return item, None
    for key in ("from", "to", "relationType"):
        if not isinstance(item.get(key), str) or not item[key].strip():
            return {}, f'a relation without "{key}"'
    return item, None


def _records(
    entities: list[tuple[int, dict[str, Any]]], relations: list[tuple[int, dict[str, Any]]]
) -> Iterator[Imported | Rejected]:
    anchors: dict[str, str] = {}  # entity name -> key of its first memory
    for _, item in entities:
        name = item["name"]
        if name not in anchors:  # the server keeps the first entity of a name
            anchors[name] = f"entity:{name}#0" if _texts(item) else f"entity:{name}"
    links: dict[str, list[tuple[str, str]]] = {}
    bad: list[Rejected] = []
    for number, rel in relations:
        missing = [rel[k] for k in ("from", "to") if rel[k] not in anchors]
        if missing:
            bad.append(Rejected(f"line {number}", f"relation to unknown entity {missing[0]!r}"))
            continue
        links.setdefault(anchors[rel["from"]], []).append(
            (anchors[rel["to"]], rel["relationType"].strip())
        )
    done: set[str] = set()
    for number, item in entities:
        name, kind = item["name"], str(item.get("entityType") or "").strip()
        if name in done:
            yield Rejected(f"line {number}", f"a second entity named {name!r}")
            continue
        done.add(name)
        cues = (name, kind) if kind else (name,)
        texts = _texts(item)
        if not texts:
            key = f"entity:{name}"
            text = f"{name} ({kind})" if kind else name
            yield Imported(key, text, cues=cues, links=tuple(links.get(key, ())))
            continue
        for i, text in enumerate(texts):
            key = f"entity:{name}#{i}"
            yield Imported(key, text, cues=cues, links=tuple(links.get(key, ())))
    yield from bad


def _texts(entity: dict[str, Any]) -> list[str]:
    """An entity's observations that say something."""
    return [o for o in entity.get("observations", []) if o.strip()]


def export_file(engine: Engine, path: Path) -> dict[str, Any]:
    """Write the user's current memories to ``path`` as a memory.jsonl; the counts."""
    entities: dict[str, dict[str, Any]] = {}
    entity_of: dict[str, str] = {}
    for engram in engine.backend.iter_engrams():
        if engram.superseded_by:
            continue  # an old version: its correction is exported instead
        name, kind = _entity(engram.id, engram.tags, engram.origin, engram.memory_type)
        entity = entities.setdefault(name, {"name": name, "entityType": kind, "observations": []})
        if engram.content not in entity["observations"]:
            entity["observations"].append(engram.content)
        entity_of[engram.id] = name
    relations: dict[tuple[str, str, str], None] = {}
    for a in engine.backend.iter_associations():
        ends = entity_of.get(a.source_id), entity_of.get(a.target_id)
        if a.relation_type in OWN_RELATIONS or None in ends or ends[0] == ends[1]:
            continue
        relations[(ends[0], ends[1], a.relation_type)] = None  # type: ignore[index]
    temporary = path.with_name(path.name + ".part")
    with temporary.open("w", encoding="utf-8") as out:
        lines = [json.dumps({"type": "entity", **e}, ensure_ascii=False) for e in entities.values()]
        lines += [
            json.dumps({"type": "relation", "from": f, "to": t, "relationType": r})
            for f, t, r in relations
        ]
        out.write("\n".join(lines))  # as the server writes it: no newline at the end
    temporary.replace(path)
    memories = sum(len(e["observations"]) for e in entities.values())
    return {
        "path": str(path),
        "entities": len(entities),
        "observations": memories,
        "relations": len(relations),
    }


def _entity(memory_id: str, tags: list[str], origin: str, memory_type: str) -> tuple[str, str]:
    """The entity name and type a memory is exported under."""
    if not tags:
        return f"memory {memory_id[:8]}", memory_type
    if origin == "import:" + NAME and len(tags) > 1:
        return tags[0], tags[1]
    return tags[0], memory_type
