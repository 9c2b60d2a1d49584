"""The incrementally kept per-cue importance lists always equal a fresh computation."""

from __future__ import annotations

import random

import pytest
from smriti_backend_kuzu.ranking import TopByImportance


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
                ranking.restrengthened(cue, key, strength)
        elif op < 0.6 and members[cue]:  # an engram deleted
            gone = rng.choice(sorted(members[cue]))
            for c in cues:
                if members[c].pop(gone, None) is not None:
                    ranking.removed(c, gone)
        elif op < 0.9 and importance:  # importance changed (ties are common: 2 decimals)
            changed = rng.choice(sorted(importance))
            importance[changed] = round(rng.random(), 2)
            for c in cues:
                if changed in members[c]:
                    ranking.reranked(
                        c, changed, members[c][changed], importance[changed], len(members[c])
                    )
        elif op < 0.92:
            ranking.drop(cue)
        limit = rng.choice([1, 3, 8, 20])
        got = ranking.best(cue, limit, members[cue], importance.__getitem__)
        assert got == brute(members[cue], importance, limit), f"step {step}"
