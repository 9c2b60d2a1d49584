"""The working set's per-cue importance lists (smriti.index.ranking), kept up to date as
the graph changes, always equal a fresh computation."""

from __future__ import annotations

import random

import pytest

from smriti.index.graph import Graph
from smriti.index.ranking import TopByImportance
from smriti.model import Engram


def brute(members: dict[str, float], importance: dict[str, float], limit: int) -> list:
    order = sorted(members, key=lambda k: (-importance[k], k))[:limit]
    return [(k, members[k]) for k in order]


@pytest.mark.parametrize("seed", range(6))
def test_random_changes_keep_the_lists_exact(seed: int) -> None:
    rng = random.Random(seed)
    ranking = TopByImportance()
    ranking.CAP = 8  # small lists, so that they fill, spill and run short often
    cues = ["hub", "mid", "rare"]
    members: dict[str, dict[str, float]] = {c: {} for c in cues}
    importance: dict[str, float] = {}
    for step in range(3000):
        op = rng.random()
        cue = rng.choice(cues)
        key = f"e{rng.randrange(60 if cue != 'rare' else 12):03d}"
        if op < 0.4:  # link (a new member, or a new strength for an existing one)
            importance.setdefault(key, round(rng.random(), 2))
            strength = round(rng.random(), 2)
            before = members[cue].get(key)
            members[cue][key] = strength
            if before is None:
                ranking.added(cue, key, strength, importance[key], len(members[cue]) - 1)
            elif before != strength:
                ranking.restrengthened(cue, key, strength, importance[key])
        elif op < 0.6 and members[cue]:  # an engram deleted
            gone = rng.choice(sorted(members[cue]))
            for c in cues:
                if members[c].pop(gone, None) is not None:
                    ranking.removed(c, gone, importance[gone])
        elif op < 0.9 and importance:  # importance changed (ties are common: 2 decimals)
            changed = rng.choice(sorted(importance))
            old = importance[changed]
            importance[changed] = round(rng.random(), 2)
            for c in cues:
                if changed in members[c]:
                    ranking.reranked(
                        c, changed, members[c][changed], old, importance[changed],
                        len(members[c]),
                    )  # fmt: skip
        elif op < 0.92:
            ranking.drop(cue)
        limit = rng.choice([1, 3, 8, 20])
        got = ranking.best(cue, limit, members[cue], importance.__getitem__)
        assert got == brute(members[cue], importance, limit), f"step {step}"


def test_hub_lists_are_computed_when_the_graph_is_loaded() -> None:
    from datetime import UTC, datetime

    graph = Graph()
    cap = graph.ranking.CAP
    rng = random.Random(3)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    importance = {f"e{i:04d}": round(rng.random(), 2) for i in range(cap * 3)}
    for key, value in importance.items():
        graph.put_engram(Engram(id=key, content=key, summary=key, memory_type="semantic",
                                 importance=value, created_at=now,
                                 last_accessed_at=now), 0)  # fmt: skip
    hub = {key: 1.0 for key in importance}
    small = {key: 1.0 for key in list(importance)[:3]}
    graph.put_links([(k, "hub", 1.0) for k in hub] + [(k, "small", 1.0) for k in small])
    assert graph.ranking.lists == {}
    graph.rank_hubs()
    assert set(graph.ranking.lists) == {"hub"}  # small cues are left for first use
    assert len(graph.ranking.lists["hub"]) == cap
    assert graph.engrams_for_cue("hub", 10) == brute(hub, importance, 10)
    assert graph.engrams_for_cue("small", 10) == brute(small, importance, 10)
