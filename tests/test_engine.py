"""The engine end to end on a real store (SMRITI_TEST_BACKEND) with zero configuration."""

from __future__ import annotations

import math
import threading
from datetime import timedelta

import pytest

from smriti.engine import Engine
from smriti.errors import InvalidInput, NotFound
from smriti.model import EngramUpdate, utcnow

from .conftest import TEST_BACKEND, EngineFactory

NEWTON = "Newton discovered gravity when an apple fell"
FRUIT = "apples and strawberries are fruit"
LOVES = "the user loves strawberries"


def test_zero_config_uses_builtins(engine: Engine) -> None:
    stats = engine.stats()
    assert stats["backend"] == TEST_BACKEND
    assert stats["embedder"] == "lexical" and stats["extractor"] == "heuristic"
    assert stats["engrams"] == 0


def test_store_returns_engram_with_cues_and_recall_finds_it(engine: Engine) -> None:
    out = engine.store(
        "Alice Smith works at Acme Corp on Kubernetes", importance=0.9, tags="work, people"
    )
    data = out.to_dict()
    assert data["importance"] == 0.9 and data["tags"] == ["work", "people"]
    names = {c["name"] for c in data["cues"]}
    assert {"alice smith", "acme corp", "work", "people"} <= names
    results = engine.recall("Where does Alice work?")
    assert results and results[0].engram.id == out.engram.id
    assert results[0].hop == 0 and results[0].match_type in {"cue", "vector", "lexical"}


def test_associative_leap_newton_to_strawberries(engine: Engine) -> None:
    ids = {t: engine.store(t).engram.id for t in (NEWTON, FRUIT, LOVES)}
    results = {r.engram.id: r for r in engine.recall("Newton", limit=5)}
    assert ids[NEWTON] in results and results[ids[NEWTON]].hop == 0
    leap = results.get(ids[LOVES])
    assert leap is not None, "the strawberry memory was not reached"
    assert leap.hop >= 1 and leap.match_type == "association"
    assert results[ids[NEWTON]].score > leap.score


def test_search_mode_is_vector_only_and_does_not_strengthen(engine: Engine) -> None:
    stored = engine.store("The Eiffel Tower is in Paris")
    engine.store("Bananas are yellow")
    hits = engine.recall("Eiffel Tower Paris", mode="search", limit=1)
    assert [h.engram.id for h in hits] == [stored.engram.id]
    assert hits[0].match_type == "vector" and 0.0 < hits[0].score <= 1.0
    again = engine.backend.get_engrams([stored.engram.id])[0]
    assert again.access_count == 0


def test_recall_strengthens_returned_memories(engine: Engine) -> None:
    stored = engine.store("Remember the milk for Tuesday")
    engine.backend.update_engrams([EngramUpdate(stored.engram.id, decay_factor=0.5)])
    engine.recall("milk")
    after = engine.backend.get_engrams([stored.engram.id])[0]
    assert after.access_count == 1
    assert after.decay_factor == pytest.approx(0.55)
    assert after.last_accessed_at >= stored.engram.last_accessed_at


def test_list_mode_and_blank_query(engine: Engine) -> None:
    first = engine.store("first memory about cats")
    second = engine.store("second memory about dogs")
    listed = engine.recall(None, limit=5)
    assert [r.match_type for r in listed] == ["list", "list"]
    assert {r.engram.id for r in listed} == {first.engram.id, second.engram.id}
    assert [r.engram.id for r in engine.recall("  ", mode="recall")] == [
        r.engram.id for r in listed
    ]


def test_memory_type_filter_applies_before_limit(engine: Engine) -> None:
    for i in range(6):
        engine.store(f"Python fact number {i}: lists are mutable sequences")
    proc = engine.store("How to install Python packages: first run pip install, then import")
    for mode in ("recall", "search", "list"):
        got = engine.recall("Python", limit=1, mode=mode, memory_type="procedural")
        assert [r.engram.id for r in got] == [proc.engram.id], mode


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "empty"),
        ({"content": "   "}, "empty"),
        ({"content": "x" * 201}, "limit"),
        ({"content": "ok", "importance": -0.1}, "importance"),
        ({"content": "ok", "importance": 1.5}, "importance"),
        ({"content": "ok", "importance": math.nan}, "importance"),
        ({"content": "ok", "importance": "abc"}, "importance"),
    ],
)
def test_bad_store_input_stores_nothing(
    engine_factory: EngineFactory, kwargs: dict, message: str
) -> None:
    engine = engine_factory(SMRITI_MAX_CONTENT_CHARS="200")
    engine.store("a memory that must survive")
    with pytest.raises(InvalidInput, match=message):
        engine.store(**kwargs)
    assert engine.backend.count_engrams() == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"limit": 0}, {"limit": -1}, {"limit": 10**9}, {"mode": "fuzzy"}, {"memory_type": "dream"}],
)
def test_bad_recall_input(engine: Engine, kwargs: dict) -> None:
    with pytest.raises(InvalidInput):
        engine.recall("anything", **kwargs)


def test_forget_unknown_and_foreign_ids_are_errors(engine_factory: EngineFactory) -> None:
    alice = engine_factory("alice")
    bob = engine_factory("bob")
    mine = alice.store("alice's secret plan")
    with pytest.raises(NotFound):
        alice.forget("no-such-id")
    with pytest.raises(NotFound):
        bob.forget(mine.engram.id)
    assert alice.backend.count_engrams() == 1
    assert bob.recall("secret plan") == []
    forgotten = alice.forget(mine.engram.id)
    assert forgotten.id == mine.engram.id and alice.backend.count_engrams() == 0
    with pytest.raises(NotFound):
        alice.forget(mine.engram.id)


def test_metacharacters_and_unicode_round_trip(engine: Engine) -> None:
    nasty = (
        "\"}) MATCH (n) DETACH DELETE n // '; DROP TABLE x; -- $param {x} `tick` \\ 🍎 東京 مرحبا"
    )
    out = engine.store(nasty, tags='a\'b, "q", 東京')
    got = engine.backend.get_engrams([out.engram.id])[0]
    assert got.content == nasty and got.tags == ["a'b", '"q"', "東京"]
    assert engine.recall(nasty, limit=3)[0].engram.id == out.engram.id


def test_similar_memories_get_associations_and_consolidation_clusters(engine: Engine) -> None:
    topics = ["rust borrow checker lifetimes ownership", "kubernetes pods deployment cluster nodes"]
    for topic in topics:
        for i in range(5):
            engine.store(f"{topic} note {i}")
    counts = engine.backend.counts()
    assert counts["associations"] > 0
    report = engine.consolidate()
    assert report.clusters >= 2 and report.pruned == 0
    clusters = {e.content.split()[0]: set() for e in engine.backend.iter_engrams()}
    for e in engine.backend.iter_engrams():
        clusters[e.content.split()[0]].add(e.cluster_id)
    assert all(len(c) == 1 for c in clusters.values())
    assert clusters["rust"] != clusters["kubernetes"]
    new = engine.store("rust borrow checker lifetimes ownership note 99")
    assert new.engram.cluster_id == next(iter(clusters["rust"]))


def test_consolidation_decays_and_prunes_old_unimportant_memories(engine: Engine) -> None:
    old = engine.store("an old unimportant detail", importance=0.1)
    kept = engine.store("an old but important fact", importance=0.9)
    long_ago = utcnow() - timedelta(days=400)
    engine.backend.update_engrams(
        [EngramUpdate(e, last_accessed_at=long_ago) for e in (old.engram.id, kept.engram.id)]
    )
    report = engine.consolidate()
    assert report.pruned == 1
    remaining = engine.backend.get_engrams([old.engram.id, kept.engram.id])
    assert [e.id for e in remaining] == [kept.engram.id]
    assert remaining[0].decay_factor == pytest.approx(math.exp(-0.01 * 400), rel=1e-3)
    assert engine.consolidate().pruned == 0


def test_consolidation_writes_decay_and_clusters_of_the_same_memories(engine: Engine) -> None:
    # Clustering runs beside the deletes; its cluster ids and the new decay factors are
    # written together afterwards, so both must land on every kept memory.
    ids = [engine.store(f"rust borrow checker lifetimes note {i}").engram.id for i in range(6)]
    doomed = engine.store("a forgettable aside", importance=0.1).engram.id
    long_ago = utcnow() - timedelta(days=100)
    engine.backend.update_engrams(
        [EngramUpdate(i, last_accessed_at=long_ago) for i in ids]
        + [EngramUpdate(doomed, last_accessed_at=long_ago - timedelta(days=300))]
    )
    report = engine.consolidate()
    assert report.pruned == 1 and report.decayed == 6 and report.reclustered == 6
    kept = engine.backend.get_engrams(ids)
    assert [e.decay_factor for e in kept] == pytest.approx([math.exp(-1)] * 6, rel=1e-3)
    assert all(e.cluster_id >= 0 for e in kept)  # all were -1 (never clustered)
    assert engine.backend.get_engrams([doomed]) == []


def test_failed_consolidation_write_raises_and_the_next_run_works(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        engine.store(f"kubernetes pods deployment note {i}")

    def broken(ids: object) -> int:
        raise RuntimeError("disk full")

    monkeypatch.setattr(engine.backend, "delete_engrams", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        engine.consolidate()
    assert {e.cluster_id for e in engine.backend.iter_engrams()} == {-1}  # nothing written
    monkeypatch.undo()
    assert engine.consolidate().clusters >= 1
    helper = engine.helper()
    engine.close()
    assert helper._shutdown  # close stops the helper thread


def test_concurrent_stores_and_recalls(engine: Engine) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                engine.store(f"thread {n} memory {i} about topic {i % 3}")
                engine.recall(f"topic {i % 3}")
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert engine.backend.count_engrams() == 40


def test_data_survives_reopen(engine_factory: EngineFactory) -> None:
    first = engine_factory("carol")
    stored = first.store("persistent memory of the blue whale")
    first.close()
    second = engine_factory("carol")
    assert second.recall("blue whale")[0].engram.id == stored.engram.id


def test_undirected_edges_keep_the_strongest_of_each_pair() -> None:
    from smriti.engine.consolidate import undirected_edges
    from smriti.model import Association

    nodes = ["a", "b", "c", "d"]
    edges = [
        Association("b", "a", 0.4),
        Association("a", "b", 0.9),  # the same pair from the other end, stronger
        Association("a", "b", 0.2),
        Association("c", "c", 1.0),  # a self-loop
        Association("c", "zz", 1.0),  # an engram outside the graph (pruned)
        Association("d", "c", 0.5),
        Association("a", "d", 0.7),
    ]
    assert undirected_edges(nodes, edges) == [("a", "b", 0.9), ("a", "d", 0.7), ("c", "d", 0.5)]
    assert undirected_edges(nodes, []) == []
