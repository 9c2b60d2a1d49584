"""A hop adds only the memories that could still be loaded, and recall answers the same.

Shared cues of a large store reach far more memories in one hop than ``load_pool`` can
load; ``expand`` keeps each hop's most similar ones (``pool_capacity``) and passes over
the rest. These tests compare recall with that bound and without it on one store.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from smriti.engine import Engine, recall

from .conftest import EngineFactory

COLOURS = [f"Colour{i}" for i in range(12)]
ANIMALS = [f"Animal{i}" for i in range(12)]
CITIES = [f"City{i}" for i in range(12)]


@pytest.fixture
def crowded(engine_factory: EngineFactory) -> Engine:
    """400 memories, each naming one of 12 colours, animals and cities (about 33
    memories per name: every name is a cue a hop follows); one in 40 is tagged."""
    engine = engine_factory(CONTIGUITY_SECONDS="0")
    rng = random.Random(7)
    for i in range(400):
        colour, animal, city = rng.choice(COLOURS), rng.choice(ANIMALS), rng.choice(CITIES)
        text = f"Note {i}: {colour} and {animal} were seen near {city} on day {i}."
        engine.store(text, tags=["rare"] if i % 40 == 0 else [])
    return engine


def answers(engine: Engine, query: str, **options: object) -> list[tuple[str, object, str, int]]:
    # Scores compared approximately: recency moves with the clock between two recalls.
    return [
        (r.engram.id, pytest.approx(r.score, rel=1e-6), r.match_type, r.hop)
        for r in engine.recall(query, **options)
    ]


def recorded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of memories each recall's expansion passed over, recall by recall."""
    counts: list[int] = []
    expand: Callable[..., object] = recall.expand

    def recording(*args: object) -> object:
        out = expand(*args)
        counts.append(len(args[4]))  # type: ignore[arg-type]
        return out

    monkeypatch.setattr(recall, "expand", recording)
    return counts


def loaded(monkeypatch: pytest.MonkeyPatch) -> list[set[tuple[str, int]]]:
    """The (memory, hop) pairs of every pool recall loads, in order."""
    pools: list[set[tuple[str, int]]] = []
    load_pool: Callable[..., dict] = recall.load_pool

    def recording(engine: Engine, found: dict, *args: object, **kwargs: object) -> dict:
        pool = load_pool(engine, found, *args, **kwargs)
        pools.append({(i, found[i].hop) for i in pool})
        return pool

    monkeypatch.setattr(recall, "load_pool", recording)
    return pools


QUERIES = [
    ("Colour3 Animal5 City7", {}),
    ("what did Animal2 do in City9", {"limit": 5}),
    ("Colour1", {"limit": 20}),
    ("Animal4 near City4", {"tags": ["rare"]}),
]


def test_recall_is_the_same_with_and_without_the_bound(
    crowded: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Access strengthening would change the second answer; it is not under test here.
    monkeypatch.setattr(recall, "strengthen", lambda *args: None)
    passed = recorded(monkeypatch)
    pools = loaded(monkeypatch)
    bounded = [answers(crowded, q, **o) for q, o in QUERIES]
    bounded_pools, pools[:] = pools[:], []
    bounded_expand = recall.expand
    monkeypatch.setattr(
        recall,
        "expand",
        lambda engine, found, context, keep, passed: bounded_expand(
            engine, found, context, None, passed
        ),
    )
    unbounded = [answers(crowded, q, **o) for q, o in QUERIES]
    assert bounded == unbounded
    # Every candidate scored, not only the ten returned (hop results rarely win).
    assert bounded_pools == pools
    assert any(hop > 0 for pool in pools for _, hop in pool)
    assert all(bounded), "every query finds memories"
    # The bound was reached: without it each of these recalls scored more candidates.
    assert all(n > 0 for n in passed[: len(QUERIES)])
    assert passed[len(QUERIES) :] == [0] * len(QUERIES)


def test_a_passed_over_memory_is_not_reached_again_one_hop_later(
    crowded: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept, it would be a first-hop candidate that no second hop adds again; passed
    over, it must not come back as a second-hop candidate either."""
    monkeypatch.setattr(recall, "strengthen", lambda *args: None)
    outcomes: list[tuple[set[str], set[str]]] = []
    expand: Callable[..., object] = recall.expand

    def recording(engine: Engine, found: dict, *args: object) -> object:
        out = expand(engine, found, *args)
        outcomes.append((set(found), set(args[2])))  # type: ignore[arg-type]
        return out

    monkeypatch.setattr(recall, "expand", recording)
    for query, options in QUERIES:
        crowded.recall(query, **options)
    assert all(passed for _, passed in outcomes)
    assert all(not found & passed for found, passed in outcomes)
