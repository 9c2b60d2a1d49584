"""Scoring experiments: the recall pipeline's channels re-fused in different ways.

``channels`` re-runs the first stages of ``smriti.engine.recall.associative`` (cue
hits, vector hits, lexical hits, multi-hop expansion) through the engine's own
functions, without access strengthening, and keeps each channel's scores. ``ranked``
then scores the candidates with a fusion rule and the engine's composite score:

- ``current``: the engine's rule (best channel wins, ``_merge``), a fidelity check;
- ``sum``: similarity = mean of the three channel scores (agreement counts);
- ``noisy-or``: similarity = 1 - prod(1 - channel score);
- ``rrf``: similarity = reciprocal-rank fusion of the channel rankings, scaled to [0, 1].

``k_factor`` sets the vector/lexical candidate depth (the engine uses 3 x limit,
``recall.SEEK_PER_RESULT``) and ``hops=False`` skips multi-hop expansion.

Hop results keep the similarity the engine gave them. Nothing here changes the engine;
it measures what a change in ``smriti/engine/recall.py`` would do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smriti.backend import Seek
from smriti.engine import recall as pipeline
from smriti.engine.scoring import Weights, composite, seed_cluster
from smriti.model import normalise_cue_name, utcnow

RULES = ("current", "sum", "noisy-or", "rrf")
RRF_K = 60


@dataclass(slots=True)
class Channels:
    """Per-channel scores of one query, and the engine's candidates after expansion."""

    cue: dict[str, float]
    vector: dict[str, float]
    lexical: dict[str, float]
    found: dict[str, Any]


def channels(engine: Any, text: str, limit: int, k_factor: int = 2, hops: bool = True) -> Channels:
    """Run the engine's channel stages for ``text`` (no strengthening)."""
    names = sorted(
        {normalise_cue_name(c.name) for c in engine.extractor.extract(text, query=True).cues}
    )
    names = [n for n in names if n]
    vectors = engine.embed([text, *names])
    k = k_factor * limit
    seeds = engine.backend.seek(
        Seek(
            k=k,
            vector=vectors[0],
            vector_floor=pipeline.VECTOR_FLOOR,
            text=text,
            cue_names=names,
            cue_vectors=vectors[1:] if names else None,
            cue_neighbours=pipeline.CUE_NEIGHBOURS,
            cue_similarity=pipeline.CUE_SIMILARITY,
            cue_fanout=pipeline.CUE_FANOUT,
        )
    )
    cue = pipeline.cue_hits(seeds)
    vector = dict(seeds.vector)
    lexical = pipeline._normalised(seeds.text)
    found: dict[str, Any] = {}
    pipeline._merge(found, cue, "cue", 0)
    pipeline._merge(found, vector, "vector", 0)
    pipeline._merge(found, lexical, "lexical", 0)
    if hops:
        pipeline.expand(engine, found)
    return Channels(cue, vector, lexical, found)


def _rrf(ch: Channels) -> dict[str, float]:
    fused: dict[str, float] = {}
    for scores in (ch.cue, ch.vector, ch.lexical):
        order = sorted(scores, key=lambda i: (-scores[i], i))
        for rank, eid in enumerate(order):
            fused[eid] = fused.get(eid, 0.0) + 1.0 / (RRF_K + rank + 1)
    top = 3.0 / (RRF_K + 1)
    return {i: s / top for i, s in fused.items()}


def similarity(ch: Channels, rule: str) -> dict[str, float]:
    """Hop-0 similarity of every direct hit under ``rule``."""
    direct = [i for i, c in ch.found.items() if c.hop == 0]
    if rule == "current":
        return {i: ch.found[i].similarity for i in direct}
    if rule == "rrf":
        return _rrf(ch)
    out = {}
    for i in direct:
        parts = [ch.cue.get(i, 0.0), ch.vector.get(i, 0.0), ch.lexical.get(i, 0.0)]
        if rule == "sum":
            out[i] = sum(parts) / 3.0
        else:
            miss = 1.0
            for p in parts:
                miss *= 1.0 - min(max(p, 0.0), 1.0)
            out[i] = 1.0 - miss
    return out


def ranked(engine: Any, ch: Channels, rule: str, limit: int) -> list[Any]:
    """The top ``limit`` engrams under ``rule`` with the engine's composite score."""
    engrams = {e.id: e for e in engine.backend.get_engrams(list(ch.found))}
    sims = similarity(ch, rule)
    now = utcnow()
    weights = Weights.from_settings(engine.settings)
    seed = seed_cluster(engrams[i] for i, c in ch.found.items() if c.hop == 0 and i in engrams)
    scored = []
    for i, e in engrams.items():
        cand = ch.found[i]
        sim = sims.get(i, cand.similarity) if cand.hop == 0 else cand.similarity
        scored.append((composite(e, sim, cand.hop, seed, now, weights), cand.hop, i, e))
    scored.sort(key=lambda t: (-t[0], t[1], t[2]))
    return [t[3] for t in scored[:limit]]
