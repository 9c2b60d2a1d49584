"""``list_page``: a filtered, keyset-paged listing of a user's engrams in one Cypher query.

The statement is assembled from the constant fragments below, one per filter that the
``Listing`` sets; every value is a parameter, never text. All filters run in the query,
before ``LIMIT``, so a page is short only when nothing more matches.

Order and the ``after`` key use the timestamps exactly as reads return them,
microseconds since the epoch (``cypher.micros``), not the stored ``DATETIME``: a node
written by another tool with nanoseconds would otherwise sort by a value the caller
never sees, and its key, fed back as ``after``, would bring it back.
"""

from __future__ import annotations

from typing import Any

from smriti.backend import Listing
from smriti_backend_neo4j.cypher import engram_map, micros
from smriti_backend_neo4j.records import epoch_micros

# la, ca: the listing key's timestamps; the IS NOT NULL guard drops a node that a
# concurrent forget deleted while the query read it (null DESC would sort it first).
_KEYED = f"""
MATCH (e:Engram {{user: $user}})
WITH e, {micros("e.last_accessed_at")} AS la, {micros("e.created_at")} AS ca
WHERE la IS NOT NULL AND ca IS NOT NULL
"""
_PAGE = f"""
WITH e, la, ca ORDER BY la DESC, ca DESC, e.id DESC LIMIT $limit
RETURN {engram_map("e")} AS p
"""
MEMORY_TYPE = "e.memory_type = $memory_type"
ANY_TAG = "any(t IN $tags WHERE t IN e.tags)"
ALL_TAGS = "all(t IN $tags WHERE t IN e.tags)"
SINCE = "ca >= $since"
UNTIL = "ca < $until"
CURRENT = "coalesce(e.superseded_by, '') = ''"
CLUSTER = "e.cluster_id = $cluster_id"
ORIGIN = "coalesce(e.origin, '') = $origin"
ORIGIN_PREFIX = "coalesce(e.origin, '') STARTS WITH $origin"
# Strictly after (la, ca, id) in descending order: smaller in that lexicographic order.
AFTER = (
    "(la < $after_la OR (la = $after_la AND "
    "(ca < $after_ca OR (ca = $after_ca AND e.id < $after_id))))"
)


def list_statement(listing: Listing, user: str) -> tuple[str, dict[str, Any]]:
    """The Cypher statement and parameters of ``listing`` for ``user``'s engrams."""
    params: dict[str, Any] = {"user": user, "limit": max(0, int(listing.limit))}
    where: list[str] = []
    if listing.memory_type is not None:
        where.append(MEMORY_TYPE)
        params["memory_type"] = listing.memory_type
    if listing.tags:
        where.append(ALL_TAGS if listing.all_tags else ANY_TAG)
        params["tags"] = [str(t) for t in listing.tags]
    if listing.since is not None:
        where.append(SINCE)
        params["since"] = epoch_micros(listing.since)
    if listing.until is not None:
        where.append(UNTIL)
        params["until"] = epoch_micros(listing.until)
    if not listing.include_superseded:
        where.append(CURRENT)
    if listing.cluster_id is not None:
        where.append(CLUSTER)
        params["cluster_id"] = int(listing.cluster_id)
    if listing.origin is not None:  # a prefix ends in ':' (smriti.model.origin_matches)
        where.append(ORIGIN_PREFIX if listing.origin.endswith(":") else ORIGIN)
        params["origin"] = listing.origin
    if listing.after is not None:
        last_accessed, created, engram_id = listing.after
        where.append(AFTER)
        params.update(
            after_la=epoch_micros(last_accessed), after_ca=epoch_micros(created),
            after_id=str(engram_id),
        )  # fmt: skip
    filters = "".join(f"  AND {clause}\n" for clause in where)
    return _KEYED + filters + _PAGE, params
