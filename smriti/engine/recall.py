"""The recall pipeline (SPEC §6): cues, vectors, lexical match, multi-hop, scoring.

When the embedder fails (ProviderError after its retries: an embedding API that answers
5xx or 429, stalls past its timeout, or returns garbage), recall degrades instead of
failing: the channels that need no embedding (cues matched by exact or normalised name,
lexical search, association and shared-cue hops and neighbours in time from those
seeds) still answer, and the results say so (``RecallResults.degraded`` and
``warning``). ``search`` mode, which is vector-only, falls back to the lexical channel
with the same flag: an agent that asked for memories gets the best available ones and
is told why they may be fewer.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Container
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from smriti.backend import Expand, Listing, Neighbourhood, Seeds, Seek, list_key, unit
from smriti.embedding import SimilarityScale
from smriti.engine.contiguity import FOLLOWS
from smriti.engine.cursor import decode, encode
from smriti.engine.fusion import CONTEXT, Fusion
from smriti.engine.inflection import relaxed
from smriti.engine.query import asks_when, subjects
from smriti.engine.scoring import Weights, composite, recency, seed_cluster
from smriti.engine.when import windows
from smriti.errors import ProviderError
from smriti.logs import get_logger
from smriti.model import (
    Association,
    Engram,
    EngramUpdate,
    RecallResult,
    normalise_cue_name,
    utcnow,
)

if TYPE_CHECKING:
    from smriti.engine.core import Engine
    from smriti.requests import RecallRequest

log = get_logger(__name__)

#: Engrams followed per cue; hub cues stay bounded.
CUE_FANOUT = 50
#: Cue-embedding matches per query cue, and the similarity they need.
CUE_NEIGHBOURS = 3
CUE_SIMILARITY = 0.8
#: (Every cosine threshold and weight here is on the engine's common scale,
#: ``Engine.scale``; a query to the backend carries it back on the embedder's own.)
#: A vector hit below this similarity is not a direct hit (it may still come as a hop),
#: and ``search`` mode returns nothing below it. With the built-in lexical embedder on
#: LoCoMo turns, a two-word query reaches it for 0.4 % of the memories sharing no term
#: with it and for 88 % of the memories it was taken from.
VECTOR_FLOOR = 0.2
#: Seeds expanded per hop, edges per seed, and the most engrams a cue may encode to be
#: followed in a hop (hub cues like "user" connect everything and explain nothing).
HOP_SEEDS = 20
HOP_EDGES = 5
HOP_CUE_MAX_DEGREE = 50
MAX_HOPS = 2
#: Vector and lexical hits asked of the backend per requested result: an answer is often
#: the 11th-30th hit of one channel that another channel's evidence lifts.
SEEK_PER_RESULT = 3
#: Candidates loaded and scored: POOL_PER_RESULT per requested result, at least POOL_MIN.
POOL_PER_RESULT = 8
POOL_MIN = 40
#: How many more candidates are loaded when recall filters (by type, tags, dates).
POOL_TYPED_FACTOR = 3
#: Edge relations that say the source is a newer account than the target.
CONTESTING = ("conflicts", "supersedes")


#: Filtered recalls whose candidates are too few also score up to this many of the
#: newest memories passing the filters (a tag few memories carry is then still found).
FILTER_SCAN = 1000
#: A newer memory in conflict with an older one that outranks it moves just above it.
PROMOTION = 1e-6


class RecallResults(list[RecallResult]):
    """Recall results, best first, and whether a channel was unavailable.

    ``degraded`` is True when the embedder failed and the results come from the
    channels that need no embedding; ``warning`` then says what happened.
    ``next_cursor`` continues a ``list`` when more memories may follow.
    """

    degraded: bool = False
    warning: str = ""
    next_cursor: str | None = None

    def mark_degraded(self, warning: str) -> RecallResults:
        """Flag these results as coming from the embedding-free channels only."""
        self.degraded, self.warning = True, warning
        return self


def outage_warning(exc: ProviderError) -> str:
    """The warning attached to degraded results (and logged)."""
    return (
        "the embedding provider is unavailable, so semantic (vector) matching was skipped; "
        "these results come from cue-name and lexical matching and their associations "
        f"only ({exc})"
    )


@dataclass(slots=True)
class Candidate:
    """A memory found by recall, before scoring."""

    similarity: float
    match_type: str
    hop: int


def recall(engine: Engine, request: RecallRequest) -> RecallResults:
    """Recall memories as ``request`` asks (list mode when it has no query).

    The request was checked when it was built (``RecallRequest.parse``). Every filter
    applies before the limit. Never fails because the embedder does: see the module
    docstring.
    """
    filters = Listing(
        request.limit,
        memory_type=request.memory_type,
        tags=request.tags,
        all_tags=request.tag_match == "all",
        since=request.since,
        until=request.until,
        include_superseded=request.include_superseded,
        origin=request.origin,
    )
    if request.lists or request.query is None:
        return list_recent(engine, filters, request.cursor)
    if request.mode == "search":
        return search(engine, request.query, filters)
    return associative(engine, request.query, filters)


def list_recent(engine: Engine, filters: Listing, cursor: object = None) -> RecallResults:
    """Most recently accessed memories; score is recency. No access strengthening.

    One more than asked is read, so ``next_cursor`` is only set when a page follows.
    """
    now = utcnow()
    after = decode(cursor, engine.user, filters)
    found = engine.backend.list_page(replace(filters, limit=filters.limit + 1, after=after))
    page = found[: filters.limit]
    results = RecallResults(RecallResult(e, recency(e, now), "list", 0) for e in page)
    if len(found) > filters.limit and page:
        results.next_cursor = encode(list_key(page[-1]), engine.user, filters)
    return results


def search(engine: Engine, text: str, filters: Listing) -> RecallResults:
    """Vector-only search; score is cosine similarity, at least VECTOR_FLOOR.

    No access strengthening. When the embedder fails, the lexical channel answers
    instead (match_type ``lexical``, score relative to the best lexical hit) and the
    results are marked degraded.
    """
    limit, kind = filters.limit, filters.memory_type
    k = limit * POOL_TYPED_FACTOR if _narrow(filters) or not filters.include_superseded else limit
    try:
        vector = engine.embed([text])[0]
    except ProviderError as exc:
        warning = outage_warning(exc)
        log.warning("embedding failed; search falls back to lexical matching", error=str(exc))
        seeds = engine.backend.seek(Seek(k=k, text=text, memory_type=kind))
        found = _loaded(engine, _normalised(seeds.text), "lexical", filters)
        return found.mark_degraded(warning)
    floor = engine.scale.raw(VECTOR_FLOOR)
    query = Seek(k=k, vector=vector, vector_floor=floor, memory_type=kind)
    hits = {i: _cosine(s) for i, s in engine.backend.seek(query).vector}
    results = _loaded(engine, hits, "vector", filters)
    if len(results) < limit and _narrow(filters):
        extra = {i: c.similarity for i, c in scan(engine, vector, filters, hits).items()}
        results = _loaded(engine, {**hits, **extra}, "vector", filters)
        results.sort(key=lambda r: (-r.score, r.engram.id))
    return RecallResults(results[:limit])


def _loaded(engine: Engine, hits: dict[str, float], match: str, filters: Listing) -> RecallResults:
    """``hits`` (id → score, best first) that pass ``filters``, as results in the same
    order, at most ``filters.limit``."""
    by_id = {e.id: e for e in engine.backend.get_engrams(list(hits), embeddings=False)}
    chosen = [i for i in hits if i in by_id and filters.matches(by_id[i])]
    return RecallResults(RecallResult(by_id[i], hits[i], match, 0) for i in chosen[: filters.limit])


def _narrow(filters: Listing) -> bool:
    """Whether ``filters`` may leave few of the usual candidates: tags, dates or origin."""
    return (
        bool(filters.tags)
        or filters.since is not None
        or filters.until is not None
        or filters.origin is not None
    )


def scan(
    engine: Engine, vector: np.ndarray, filters: Listing, have: Container[str]
) -> dict[str, Candidate]:
    """Candidates from the newest FILTER_SCAN memories passing ``filters``, by cosine
    similarity to the query (at least VECTOR_FLOOR), leaving out ids in ``have``."""
    listed = engine.backend.list_page(replace(filters, limit=FILTER_SCAN, after=None))
    query = unit(vector)
    floor = engine.scale.raw(VECTOR_FLOOR)
    out: dict[str, Candidate] = {}
    for e in listed:
        if e.id in have or e.embedding is None:
            continue
        sim = _cosine(float(unit(e.embedding) @ query))
        if sim >= floor:
            out[e.id] = Candidate(sim, "vector", 0)
    return out


def _cosine(score: float) -> float:
    """Clamp float32 rounding (1.0000001) back into [-1, 1]."""
    return max(-1.0, min(1.0, float(score)))


def associative(engine: Engine, text: str, filters: Listing) -> RecallResults:
    """The full multi-stage recall, then access strengthening of what is returned.

    When the embedder fails, the vector channel and cue-embedding matching are skipped
    and the rest runs as usual; the results are then marked degraded.
    """
    limit, memory_type = filters.limit, filters.memory_type
    kinds: dict[str, str] = {}
    for ref in engine.extractor.extract(text, query=True).cues:
        if name := normalise_cue_name(ref.name):
            kinds.setdefault(name, ref.cue_type)
    names = sorted(kinds)
    # Names match by name only: "Donggeon" must not find "Dongwon" through the cue
    # embeddings, which put similarly spelled names close together.
    fuzzy = [n for n in names if kinds[n] != "entity"]
    warning = ""
    try:
        vectors: np.ndarray | None = engine.embed([text, *fuzzy])
    except ProviderError as exc:
        warning, vectors = outage_warning(exc), None
        log.warning("embedding failed; recall uses cue names and lexical matching", error=str(exc))
    scale = engine.scale
    seeds = engine.backend.seek(
        Seek(
            k=SEEK_PER_RESULT * limit,
            vector=vectors[0] if vectors is not None else None,
            vector_floor=scale.raw(VECTOR_FLOOR),
            # Questions inflect their verbs unlike the statements that answer them.
            text=relaxed(text),
            memory_type=memory_type,
            cue_names=names,
            cue_vectors=vectors[1:] if vectors is not None and fuzzy else None,
            cue_neighbours=CUE_NEIGHBOURS,
            cue_similarity=scale.raw(CUE_SIMILARITY),
            cue_fanout=CUE_FANOUT,
        )
    )
    # ... and a stored name is never reached through a query cue's embedding.
    seeds.cues = [m for m in seeds.cues if m.similarity >= 1.0 or m.cue_type != "entity"]
    fusion = Fusion(
        cue=cue_hits(seeds, len(names), scale),
        vector={i: _cosine(s) for i, s in seeds.vector},
        lexical=_normalised(seeds.text),
        query=vectors[0] if vectors is not None else None,
        subjects=subjects(text, (n for n in names if kinds[n] == "entity")),
        when=windows(text),
        asks_when=asks_when(text),
        scale=scale,
    )
    found: dict[str, Candidate] = {}
    _merge(found, fusion.cue, "cue", 0)
    _merge(found, fusion.vector, "vector", 0)
    _merge(found, fusion.lexical, "lexical", 0)
    fusion.provisional(found)
    passed_over: set[str] = set()
    contested = expand(engine, found, fusion.context, pool_capacity(filters), passed_over)
    if vectors is not None and _narrow(filters):
        pool = load_pool(engine, found, filters)
        if len(pool) < limit:
            found.update(scan(engine, vectors[0], filters, found.keys() | passed_over))
    results = RecallResults(rank(engine, found, filters, contested, fusion))
    return results.mark_degraded(warning) if warning else results


def cue_hits(
    seeds: Seeds, asked: int = 0, scale: SimilarityScale | None = None
) -> dict[str, float]:
    """Engrams reached from the query's matched cues, IDF-weighted, scaled to [0, 1].

    The scale is the weight of every matched cue plus, for each of the ``asked`` query
    cues beyond the number of stored cues matched, the weight of a cue only one memory
    has: a memory that matches one cue of a three-cue query scores well below one that
    matches all three, even when nothing else matched the other two.
    """
    if not seeds.cues:
        return {}
    common = (scale or SimilarityScale()).common
    weights = {m.cue_id: common(m.similarity) * idf(m.degree, seeds.total) for m in seeds.cues}
    scores: dict[str, float] = {}
    for match in seeds.cues:
        for engram_id, strength in match.engrams:
            scores[engram_id] = scores.get(engram_id, 0.0) + weights[match.cue_id] * strength
    unmatched = max(0, asked - len(seeds.cues)) * idf(1, seeds.total)
    norm = (sum(weights.values()) + unmatched) or 1.0
    return {eid: min(1.0, s / norm) ** 0.5 for eid, s in scores.items()}


def idf(degree: int, total: int) -> float:
    """Inverse document frequency of a cue encoding ``degree`` of ``total`` engrams."""
    return math.log(1.0 + (total + 1) / (max(degree, 1) + 0.5))


def _normalised(hits: list[tuple[str, float]]) -> dict[str, float]:
    if not hits:
        return {}
    top = max(s for _, s in hits) or 1.0
    return {i: max(0.0, s / top) for i, s in hits}


def _merge(found: dict[str, Candidate], scores: dict[str, float], match: str, hop: int) -> None:
    for eid, sim in scores.items():
        have = found.get(eid)
        if have is None or (have.hop, -have.similarity) > (hop, -sim):
            found[eid] = Candidate(sim, match, hop)


def expand(
    engine: Engine,
    found: dict[str, Candidate],
    context: set[tuple[str, str]] | None = None,
    keep: int | None = None,
    passed_over: set[str] | None = None,
) -> set[tuple[str, str]]:
    """Add up to MAX_HOPS hops over associations (both directions) and shared cues.

    Returns the (newer, older) pairs of the ``conflicts`` and ``supersedes`` edges seen
    on the way, for ``rank``. The ``follows`` edges of the direct hits expanded are not
    hops: their (later, earlier) pairs go to ``context`` and the neighbour not yet found
    becomes a ``context`` candidate, scored on its own (``smriti.engine.fusion``).

    With ``keep``, each hop adds only its ``keep`` most similar memories (at least
    HOP_SEEDS): ``load_pool`` orders the candidates of one hop by similarity, so one
    below them could never be loaded, and the shared cues of a hop reach hundreds. The
    others go to ``passed_over`` and are not reached again by a later hop, exactly as
    when they were kept.
    """
    contested: set[tuple[str, str]] = set()
    skipped = passed_over if passed_over is not None else set()
    frontier = _top(found, 0)
    for hop in range(1, MAX_HOPS + 1):
        if not frontier:
            return contested
        # One more edge per direction than a hop follows: the ``follows`` edge to a
        # neighbour in time (strength 1) would otherwise take an association's place.
        around = engine.backend.neighbourhood(
            Expand(frontier, HOP_EDGES + 1, HOP_CUE_MAX_DEGREE, HOP_CUE_MAX_DEGREE)
        )
        reached: dict[str, float] = {}
        for edge in _strongest(around.associations, frontier):
            if edge.relation_type in CONTESTING:
                contested.add((edge.source_id, edge.target_id))
            if edge.relation_type == FOLLOWS:
                if hop == 1 and context is not None:
                    _neighbour_in_time(found, context, edge.source_id, edge.target_id)
                continue
            for here, there in ((edge.source_id, edge.target_id), (edge.target_id, edge.source_id)):
                if here in frontier and there not in found and there not in skipped:
                    sim = found[here].similarity * edge.strength
                    reached[there] = max(reached.get(there, 0.0), sim)
        for there, sim in shared_cue_hops(around, found).items():
            if there not in skipped:
                reached[there] = max(reached.get(there, 0.0), sim)
        if keep is not None and len(reached) > max(keep, HOP_SEEDS):
            # (-similarity, id): load_pool's order within one hop, ties included.
            best = heapq.nsmallest(max(keep, HOP_SEEDS), ((-s, i) for i, s in reached.items()))
            skipped.update(reached.keys() - {i for _, i in best})
            reached = {i: -s for s, i in best}
        _merge(found, reached, "association", hop)
        frontier = _top(found, hop)
    return contested


def _strongest(edges: list[Association], frontier: list[str]) -> list[Association]:
    """Every ``follows`` edge, and the HOP_EDGES strongest others per frontier memory and
    direction; equal strengths are ordered by the other end's id, so every backend keeps
    the same edges whatever order it returns ties in."""
    ends = set(frontier)
    kept: dict[tuple[str, bool], list[Association]] = {}
    out: list[Association] = []
    for edge in edges:
        if edge.relation_type == FOLLOWS:
            out.append(edge)
            continue
        for here, outgoing in ((edge.source_id, True), (edge.target_id, False)):
            if here in ends:
                kept.setdefault((here, outgoing), []).append(edge)
    chosen: dict[tuple[str, str, str], Association] = {}
    for (_, outgoing), group in kept.items():
        group.sort(key=lambda e: (-e.strength, e.target_id if outgoing else e.source_id))
        for edge in group[:HOP_EDGES]:
            chosen[(edge.source_id, edge.target_id, edge.relation_type)] = edge
    return out + list(chosen.values())


def _neighbour_in_time(
    found: dict[str, Candidate], context: set[tuple[str, str]], later: str, earlier: str
) -> None:
    context.add((later, earlier))
    for engram_id in (later, earlier):
        found.setdefault(engram_id, Candidate(0.0, CONTEXT, 1))


def shared_cue_hops(around: Neighbourhood, found: dict[str, Candidate]) -> dict[str, float]:
    """engram → cue → engram leaps through specific (non-hub) cues."""
    via: dict[str, list[str]] = {}
    for link in around.links:
        via.setdefault(link.cue_id, []).append(link.engram_id)
    reached: dict[str, float] = {}
    for cue_id, engrams in around.members.items():
        degree = around.degrees.get(cue_id, 0)
        if not 1 < degree <= HOP_CUE_MAX_DEGREE or cue_id not in via:
            continue
        strength = 1.0 / (1.0 + math.log(degree))
        parent = max(found[e].similarity for e in via[cue_id] if e in found)
        for engram_id, _ in engrams:
            if engram_id not in found:
                reached[engram_id] = max(reached.get(engram_id, 0.0), parent * strength)
    return reached


def _top(found: dict[str, Candidate], hop: int) -> list[str]:
    ids = [i for i, c in found.items() if c.hop == hop]
    ids.sort(key=lambda i: (-found[i].similarity, i))
    return ids[:HOP_SEEDS]


def rank(
    engine: Engine,
    found: dict[str, Candidate],
    filters: Listing,
    contested: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
    fusion: Fusion | None = None,
) -> list[RecallResult]:
    """Score candidates, keep the best ``limit`` passing the filters, strengthen them.

    With ``fusion``, direct hits and context neighbours get their exact fused
    similarity first, and context neighbours are scored as direct hits (hop 0 in the
    composite score; their result still says hop 1).

    Of two memories in conflict (or a version and its correction, when superseded ones
    are asked for), the newer ranks first: when the older one scores higher, the newer
    one moves just above it (the older one keeps its score, so a false alarm costs any
    other result one place at most).
    """
    exact = fusion is not None and fusion.query is not None
    engrams = load_pool(engine, found, filters, embeddings=exact)
    if fusion is not None:
        fusion.rescore(found, engrams)
    now = utcnow()
    weights = Weights.from_settings(engine.settings)
    seed = seed_cluster(engrams[i] for i, c in found.items() if c.hop == 0 and i in engrams)
    results = {
        i: RecallResult(
            e,
            composite(e, found[i].similarity, _scored_hop(found[i]), seed, now, weights),
            found[i].match_type,
            found[i].hop,
        )
        for i, e in engrams.items()
    }
    by_older = sorted(contested, key=lambda p: -results[p[1]].score if p[1] in results else 0)
    for newer, older in by_older:
        pair = results.get(newer), results.get(older)
        if pair[0] is not None and pair[1] is not None and pair[1].score >= pair[0].score:
            pair[0].score = pair[1].score + PROMOTION
    ranked = sorted(results.values(), key=lambda r: (-r.score, r.hop, r.engram.id))
    chosen = ranked[: filters.limit]
    strengthen(engine, [r.engram for r in chosen], now)
    return chosen


def _scored_hop(candidate: Candidate) -> int:
    return 0 if candidate.match_type == CONTEXT else candidate.hop


def pool_capacity(filters: Listing) -> int:
    """How many candidates ``load_pool`` asks the backend for, at most."""
    size = max(POOL_MIN, POOL_PER_RESULT * filters.limit)
    typed = filters.memory_type is not None or _narrow(filters)
    return size * (POOL_TYPED_FACTOR if typed else 1)


def load_pool(
    engine: Engine, found: dict[str, Candidate], filters: Listing, embeddings: bool = False
) -> dict[str, Engram]:
    """Load the most promising candidates (by similarity per hop) passing ``filters``.

    One ``get_engrams`` call (one round trip on a server backend): a candidate far down
    this order cannot win on recency, importance and decay alone. With a filter,
    POOL_TYPED_FACTOR times as many are loaded, since cue and hop candidates are not
    filtered before this. Context neighbours, whose own similarity is not known yet,
    come after the best half of the rest. With ``embeddings`` the engrams carry their
    embeddings (for exact cosines).
    """
    size = max(POOL_MIN, POOL_PER_RESULT * filters.limit)
    ranked = sorted(
        (i for i, c in found.items() if c.match_type != CONTEXT),
        key=lambda i: (-found[i].similarity / (1 + found[i].hop), i),
    )
    context = sorted(i for i, c in found.items() if c.match_type == CONTEXT)
    order = ranked[: size // 2] + context + ranked[size // 2 :]
    wanted = order[: pool_capacity(filters)]
    loaded = {
        e.id: e
        for e in engine.backend.get_engrams(wanted, embeddings=embeddings)
        if filters.matches(e)
    }
    chosen = [i for i in wanted if i in loaded][:size]
    return {i: loaded[i] for i in chosen}


def strengthen(engine: Engine, engrams: list[Engram], now: object) -> None:
    """Access strengthening: count + 1, last access = now, decay + 0.05 (cap 1)."""
    updates = [
        EngramUpdate(
            e.id,
            access_count=e.access_count + 1,
            last_accessed_at=now,  # type: ignore[arg-type]
            decay_factor=min(1.0, e.decay_factor + 0.05),
        )
        for e in engrams
    ]
    if updates:
        engine.backend.strengthen_engrams(updates)
    for e, u in zip(engrams, updates, strict=True):
        e.access_count, e.last_accessed_at, e.decay_factor = u.access_count, now, u.decay_factor  # type: ignore[assignment]
