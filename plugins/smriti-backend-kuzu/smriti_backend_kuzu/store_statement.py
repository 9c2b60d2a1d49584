"""One Cypher statement that stores a memory: engram, new cues, links, pending
co-occurrences and associations.

Each Kùzu statement costs ~0.3-0.5 ms of fixed overhead at 100k memories, and a store
used to run four to five of them. The statement text depends only on the shape of the
memory (are there new cues, known cues, a pending row, how many associations), so each
shape is prepared once per connection and every value is a parameter.

``UNWIND`` over an empty list yields no rows and would end the statement there, so a
section is only emitted when its list is non-empty, and sections are joined by
``WITH e, count(*)`` to get back to one row.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from smriti_backend_kuzu.codec import ENGRAM_COLUMNS

_LINK = "CREATE (e)-[:EncodedBy {strength: 1.0, created_at: $created_at}]->(c)"


@lru_cache(maxsize=256)
def store_statement(new_cues: bool, known_cues: bool, pending: bool, associations: int) -> str:
    """The statement for one shape of memory (see the module docstring)."""
    engram = "(e:Engram {" + ", ".join(f"{c}: ${c}" for c in ENGRAM_COLUMNS) + "})"
    parts = ["CREATE " + engram + (", (:CoOccursPending {cues: $cues})" if pending else "")]
    if new_cues:
        parts.append(
            "UNWIND $new AS n CREATE (c:Cue {id: n.id, name: n.name, "
            f"cue_type: n.cue_type, embedding: n.embedding}}) {_LINK}"
        )
    if known_cues:
        parts.append(f"UNWIND $known AS cid MATCH (c:Cue {{id: cid}}) {_LINK}")
    if associations:
        match = ", ".join(f"(b{i}:Engram {{id: $b{i}}})" for i in range(associations))
        create = ", ".join(
            f"(e)-[:AssociatedWith {{strength: $s{i}, relation_type: $t{i}, "
            f"created_at: $ts{i}}}]->(b{i})"
            for i in range(associations)
        )
        parts.append(f"MATCH {match} CREATE {create}")
    # Back to one row per engram between sections (after an UNWIND there are many).
    return " WITH e, count(*) AS _rows WITH e ".join(parts)


def store_parameters(
    engram: dict[str, Any],
    new: list[dict[str, Any]],
    known: list[str],
    cues: list[str],
    associations: list[dict[str, Any]],
) -> dict[str, Any]:
    """Parameters of ``store_statement`` for this memory."""
    params = dict(engram)
    if new:
        params["new"] = new
    if known:
        params["known"] = known
    if len(cues) > 1:
        params["cues"] = cues
    for i, r in enumerate(associations):
        params.update({f"b{i}": r["b"], f"s{i}": r["s"], f"t{i}": r["t"], f"ts{i}": r["ts"]})
    return params
