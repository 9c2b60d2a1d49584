"""Tenant isolation: users sharing one Neo4j database never see or touch each other's data.

The reference server filtered vector-index hits by user *after* the top-k cut (or not
at all); here the filter runs before the cut, so a user with few memories in a large
shared index still gets all of their own hits and nobody else's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from smriti_backend_neo4j import reads as reads_module
from smriti_backend_neo4j.backend import Neo4jBackend

from smriti import NotFound
from smriti.backend import Cue, EngramUpdate, Listing, Seek, unit
from smriti.config import Settings
from smriti.engine import Engine
from smriti.plugins import create_plugin_manager
from smriti.testing import GraphBuilder

from .conftest import ServerInfo, wipe

DIMS = 16


def _crowd(build: GraphBuilder, query: np.ndarray, n: int, offset: int) -> list:
    """``n`` engrams all very close to ``query`` (they would fill any top-k)."""
    return [
        build.engram(offset + i, embedding=build.near(query, seed=offset + i, noise=0.05),
                     content=f"zebra crossing number {i}")
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize("max_fetch", [4096, 64], ids=["growing-k", "exact-fallback"])
def test_index_hits_are_filtered_by_user_before_the_cut(
    make_backend: Callable[..., Neo4jBackend], monkeypatch: pytest.MonkeyPatch, max_fetch: int
) -> None:
    monkeypatch.setattr(reads_module, "MAX_FETCH", max_fetch)
    build = GraphBuilder(DIMS)
    query = build.vec(1)
    alice, bob = make_backend("alice"), make_backend("bob")
    alice.import_records(_crowd(build, query, 400, 0), [], [], [], [])
    mine = [build.engram(1000 + i, embedding=build.near(query, seed=77 + i, noise=1.5),
                         content=f"a zebra of bob {i}") for i in range(5)]  # fmt: skip
    bob.import_records(mine, [], [], [], [])
    assert sorted(alice.ensure_indexes(DIMS, 50)) == [
        "smriti_cue_embedding",
        "smriti_engram_embedding",
    ]
    assert bob.ensure_indexes(DIMS, 0) == [], "the shared indexes exist already"
    bob._refresh_vector_indexes()

    seeds = bob.seek(Seek(k=5, vector=query * 2.0, text="zebra"))
    assert sorted(i for i, _ in seeds.vector) == sorted(e.id for e in mine)
    for engram_id, score in seeds.vector:
        [e] = [m for m in mine if m.id == engram_id]
        assert score == pytest.approx(float(unit(query) @ e.embedding), abs=1e-3)
    assert {i for i, _ in seeds.text} == {e.id for e in mine}
    assert seeds.total == 5
    theirs = alice.seek(Seek(k=10, vector=query, text="zebra"))
    assert {i for i, _ in theirs.vector} <= {f"e{i:05d}" for i in range(400)}
    assert len(theirs.vector) == len(theirs.text) == 10 and theirs.total == 400


def test_listing_and_updates_keep_to_the_user(make_backend: Callable[..., Neo4jBackend]) -> None:
    # Same ids, tags and clusters for both users: only the user property tells them apart.
    build = GraphBuilder(DIMS)
    alice, bob = make_backend("alice"), make_backend("bob")
    alice.import_records([build.engram(i, tags=["okapi"]) for i in range(6)], [], [], [], [])
    bob.import_records([build.engram(i, tags=["okapi"]) for i in range(2)], [], [], [], [])
    bob.update_engrams([EngramUpdate("e00001", tags=["tapir"], superseded_by="e00000",
                                     superseded_at=build.engram(9).created_at)])  # fmt: skip
    listing = Listing(10, tags=["okapi"], include_superseded=False)
    assert [e.id for e in bob.list_page(listing)] == ["e00000"]
    assert [e.id for e in alice.list_page(listing)] == [f"e{i:05d}" for i in range(5, -1, -1)]
    assert [e.tags for e in alice.get_engrams(["e00001"])] == [["okapi"]]
    assert [i for i, _ in alice.seek(Seek(k=10, text="tapir")).text] == []
    assert [i for i, _ in bob.seek(Seek(k=10, text="tapir")).text] == ["e00001"]


def test_cues_by_id_are_the_users(make_backend: Callable[..., Neo4jBackend]) -> None:
    build = GraphBuilder(DIMS)
    alice, bob = make_backend("alice"), make_backend("bob")
    alice.add_memory(build.engram(1), [build.cue("heron"), build.cue("egret")], [])
    bob.add_memory(build.engram(1), [build.cue("heron", seed=4)], [])
    got = {c.id: c for c in alice.get_cues_by_id(["c-egret", "c-heron", "c-heron-4", "nope"])}
    assert sorted(got) == ["c-egret", "c-heron"]
    np.testing.assert_allclose(got["c-heron"].embedding, build.cue("heron").embedding, rtol=1e-6)
    assert [c.id for c in bob.get_cues_by_id(["c-egret", "c-heron-4"])] == ["c-heron-4"]
    assert bob.get_cues_by_id([]) == []


def test_cue_index_hits_are_filtered_by_user(make_backend: Callable[..., Neo4jBackend]) -> None:
    build = GraphBuilder(DIMS)
    alice, bob = make_backend("alice"), make_backend("bob")
    target = build.vec(5)
    crowd = [build.cue(f"a{i}", seed=i) for i in range(300)]
    crowd = [
        Cue(c.id, c.name, c.cue_type, build.near(target, i, 0.05)) for i, c in enumerate(crowd)
    ]
    alice.import_records(_crowd(build, target, 60, 0), crowd, [], [], [])
    own = build.cue("bobs-cue", seed=9)
    bob.add_memory(build.engram(999), [own], [])
    alice.ensure_indexes(DIMS, 50)
    bob._refresh_vector_indexes()
    # Alice's cues fill every index hit and pass any floor: Bob's cue comes from the
    # exact scan that follows.
    query = Seek(k=5, cue_vectors=target[None, :], cue_neighbours=3, cue_similarity=-1.0)
    [match] = bob.seek(query).cues
    assert match.cue_id == own.id and match.degree == 1 and match.engrams == [("e00999", 1.0)]
    assert match.similarity == pytest.approx(float(target @ own.embedding), abs=1e-3)
    near = alice.seek(Seek(k=5, cue_vectors=target[None, :], cue_neighbours=3)).cues
    assert len(near) == 3 and all(m.cue_id.startswith("c-a") for m in near)


# -- property-based: random interleavings through the Engine ----------------------------

WORDS = ("apple", "zebra", "paris", "newton", "kiwi", "gravity", "river", "music")


@pytest.fixture(scope="module")
def engine_env(neo4j_server: ServerInfo, tmp_path_factory: pytest.TempPathFactory) -> dict:
    wipe(neo4j_server)
    return {
        "DB_TYPE": "neo4j",
        "NEO4J_URI": neo4j_server.uri,
        "NEO4J_USERNAME": neo4j_server.username,
        "NEO4J_PASSWORD": neo4j_server.password,
        "STORAGE_LOCATION": str(tmp_path_factory.mktemp("store")),
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_SYNC_INTERVAL": "0",
        "INDEX_THRESHOLD": "3",  # vector indexes appear early, so index queries are used
        "SMRITI_LOAD_PLUGINS": "smriti-backend-neo4j",
        "SMRITI_STRICT_PLUGINS": "1",
    }


@pytest.fixture
def engines(engine_env: dict) -> Iterator[Callable[[str], Engine]]:
    opened: list[Engine] = []

    def make(user: str) -> Engine:
        environ = {**engine_env, "ACCESSING_USER": user}
        pm, _ = create_plugin_manager(environ=environ)  # the real entry point
        engine = Engine.from_settings(Settings.from_env(environ), pm=pm)
        engine.open()
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
operations = st.lists(
    st.tuples(
        st.integers(0, 1),  # who acts
        st.sampled_from(["store", "store", "recall", "search", "list", "forget", "consolidate"]),
        texts,
        st.integers(0, 1000),  # which memory a forget aims at
        st.booleans(),  # forget one of the other user's memories instead
    ),
    min_size=4,
    max_size=18,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_two_users_never_see_or_touch_each_other(
    engines: Callable[[str], Engine], ops: list[tuple[int, str, str, int, bool]]
) -> None:
    tag = uuid.uuid4().hex[:8]
    users = [engines(f"alice-{tag}"), engines(f"bob-{tag}")]
    owned: list[dict[str, str]] = [{}, {}]  # id -> content, per user
    for who, op, text, pick, foreign in ops:
        me, other = users[who], users[1 - who]
        if op == "store":
            outcome = me.store(f"{text} note {len(owned[who])}", importance=0.8)
            owned[who][outcome.engram.id] = outcome.engram.content
        elif op in ("recall", "search", "list"):
            results = me.recall(None if op == "list" else text, limit=10, mode=op)
            assert {r.engram.id for r in results} <= set(owned[who]), f"{op} leaked"
        elif op == "forget":
            target_owner = 1 - who if foreign else who
            ids = sorted(owned[target_owner])
            if not ids:
                continue
            target = ids[pick % len(ids)]
            if foreign:
                with pytest.raises(NotFound):
                    me.forget(target)
                assert other.backend.get_engrams([target]), "a foreign forget deleted it"
            else:
                me.forget(target)
                del owned[who][target]
        else:
            me.consolidate()
    for i, engine in enumerate(users):
        assert {e.id for e in engine.backend.iter_engrams()} == set(owned[i])
        assert engine.backend.count_engrams() == len(owned[i])
        cue_ids = {c.id for c in engine.backend.iter_cues()}
        for link in engine.backend.iter_links():
            assert link.engram_id in owned[i] and link.cue_id in cue_ids
        for a in engine.backend.iter_associations():
            assert a.source_id in owned[i] and a.target_id in owned[i]


def test_very_long_text_queries_work(make_backend: Callable[..., Neo4jBackend]) -> None:
    build = GraphBuilder(DIMS)
    backend = make_backend("alice")
    backend.add_memory(build.engram(1, content="needle in the haystack"), [], [])
    words = " ".join(f"word{i}" for i in range(3000))
    assert [i for i, _ in backend.seek(Seek(k=5, text=f"needle {words}")).text] == ["e00001"]
