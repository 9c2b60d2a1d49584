"""The contract's derived reads, built from the streams every backend provides.

``StorageBackend`` answers these from its ``iter_*`` streams when a backend does not
override them: correct for any store, but each one reads a whole stream, so a backend
with a database behind it overrides the ones on its hot paths (``get_engrams``,
``list_page`` and ``neighbourhood`` are on recall's) with a query. The conformance
suite runs against these defaults too (``tests/test_contract_defaults.py``).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing

from smriti.backend.reads import Expand, Listing, Neighbourhood, list_key
from smriti.model import Association, Cue, Engram, Link, normalise_cue_name


def engrams_with_ids(engrams: Iterator[Engram], ids: Sequence[str]) -> list[Engram]:
    """The engrams of the stream whose id is in ``ids``; stops once all are found."""
    wanted = set(ids)
    found: list[Engram] = []
    if not wanted:
        return found
    with closing(engrams):  # a stream may hold a cursor: release it when stopping early
        for e in engrams:
            if e.id in wanted:
                found.append(e)
                if len(found) == len(wanted):
                    break
    return found


def listing_page(engrams: Iterable[Engram], listing: Listing) -> list[Engram]:
    """``listing`` over a stream of engrams: ``listing_sorted`` without holding them all
    (the keys are distinct, so the best ``limit`` come in listing order)."""
    if listing.limit <= 0:
        return []
    after = listing.after
    chosen = (e for e in engrams if listing.matches(e) and (after is None or list_key(e) < after))
    return heapq.nlargest(listing.limit, chosen, key=list_key)


def cues_named(cues: Iterable[Cue], names: Sequence[str]) -> list[Cue]:
    """The cues whose normalised name is one of ``names`` (normalised too), one per name."""
    keys = list(dict.fromkeys(normalise_cue_name(n) for n in names))
    if not keys:
        return []
    wanted = set(keys)
    by_key = {k: c for c in cues if (k := normalise_cue_name(c.name)) in wanted}
    return [by_key[k] for k in keys if k in by_key]


def neighbourhood(
    query: Expand,
    importance: dict[str, float],
    associations: Iterable[Association],
    links: Iterable[Link],
) -> Neighbourhood:
    """``StorageBackend.neighbourhood`` over a store's streams: ``importance`` holds every
    engram's (id: importance), ``associations`` and ``links`` are read once (the
    associations only when ``query.edges`` asks for them)."""
    ids = [i for i in dict.fromkeys(query.ids) if i in importance]
    around = Neighbourhood()
    if not ids:
        return around
    chosen = set(ids)
    if query.edges > 0:
        around.associations = _strongest_edges(associations, chosen, ids, query.edges)
    degree: Counter[str] = Counter()
    members: defaultdict[str, list[tuple[str, float]]] = defaultdict(list)
    for link in links:
        degree[link.cue_id] += 1
        members[link.cue_id].append((link.engram_id, link.strength))
        if link.engram_id in chosen:
            around.links.append(link)
    own = sorted({link.cue_id for link in around.links})
    around.degrees = {c: degree[c] for c in own}
    if query.engrams_per_cue <= 0:
        return around
    for cue in own:
        if degree[cue] <= query.cue_max_degree:
            # Most important first, ties by id, as every backend ranks a cue's engrams.
            ranked = sorted(members[cue], key=lambda m: (-importance.get(m[0], 0.0), m[0]))
            around.members[cue] = ranked[: query.engrams_per_cue]
    return around


def _strongest_edges(
    associations: Iterable[Association], chosen: set[str], ids: list[str], limit: int
) -> list[Association]:
    """Up to ``limit`` strongest edges per id of ``ids`` and direction (ties by the
    other end's id), each edge once."""
    outgoing: defaultdict[str, list[Association]] = defaultdict(list)
    incoming: defaultdict[str, list[Association]] = defaultdict(list)
    for a in associations:
        if a.source_id in chosen:
            outgoing[a.source_id].append(a)
        if a.target_id in chosen:
            incoming[a.target_id].append(a)
    found: dict[tuple[str, str], Association] = {}
    for key in ids:
        best = heapq.nsmallest(limit, outgoing[key], key=lambda a: (-a.strength, a.target_id))
        best += heapq.nsmallest(limit, incoming[key], key=lambda a: (-a.strength, a.source_id))
        for a in best:
            found[(a.source_id, a.target_id)] = a
    return list(found.values())
