"""Tenant isolation through the smriti Engine on a real FalkorDB (property-based).

Two users share one FalkorDB graph (tenant mode) or have a graph each (graph mode).
Random interleavings of store / recall / search / list / forget / consolidate must never
show one user another user's memory, and forgetting another user's id must be NotFound.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from smriti_backend_falkor.connection import graph_name_for

from smriti import NotFound
from smriti.config import Settings
from smriti.engine import Engine
from smriti.plugins import create_plugin_manager

from .conftest import drop_graphs

USERS = ("alice", "bob")
WORDS = ("apple", "zebra", "paris", "gravity", "music", "coffee", "river", "python")


def plugin_manager():  # noqa: ANN201 - pluggy.PluginManager
    """Built-ins plus this plugin, registered as its entry point would be."""
    import smriti_backend_falkor.plugin as falkor_plugin

    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(falkor_plugin, name="smriti-backend-falkor")
    return pm


class Pair:
    """Engines for alice and bob on one FalkorDB; cleaned up by ``close``."""

    def __init__(self, addr: str, isolation: str, tmp: Path) -> None:
        self.addr = addr
        self.graph = f"smriti_prop_{uuid.uuid4().hex[:10]}"
        self.isolation = isolation
        env = {
            "DB_TYPE": "falkordb",
            "FALKOR_ADDR": addr,
            "FALKOR_GRAPH": self.graph,
            "FALKOR_ISOLATION": isolation,
            "STORAGE_LOCATION": str(tmp),
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
            "INDEX_THRESHOLD": "3",
        }
        self.engines = {
            u: Engine.from_settings(
                Settings.from_env({**env, "ACCESSING_USER": u}), pm=plugin_manager()
            ).open()
            for u in USERS
        }

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
        names = {graph_name_for(u, self.isolation, self.graph) for u in USERS}
        drop_graphs(self.addr, names | {self.graph})


@pytest.fixture
def pair_factory(falkor_addr: str, tmp_path: Path) -> Iterator[object]:
    pairs: list[Pair] = []

    def make(isolation: str) -> Pair:
        pair = Pair(falkor_addr, isolation, tmp_path)
        pairs.append(pair)
        return pair

    yield make
    for pair in pairs:
        pair.close()


op = st.one_of(
    st.tuples(
        st.just("store"),
        st.sampled_from(USERS),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    ),
    st.tuples(st.just("recall"), st.sampled_from(USERS), st.sampled_from(WORDS)),
    st.tuples(st.just("search"), st.sampled_from(USERS), st.sampled_from(WORDS)),
    st.tuples(st.just("list"), st.sampled_from(USERS), st.none()),
    st.tuples(st.just("forget"), st.sampled_from(USERS), st.integers(0, 50)),
    st.tuples(st.just("consolidate"), st.sampled_from(USERS), st.none()),
)


def run_ops(pair: Pair, ops: list[tuple[str, str, object]]) -> None:
    owned: dict[str, set[str]] = {u: set() for u in USERS}
    for kind, user, arg in ops:
        engine, other = pair.engines[user], next(u for u in USERS if u != user)
        if kind == "store":
            out = engine.store(f"{user} note: " + " ".join(arg), importance=0.8)  # type: ignore[arg-type]
            owned[user].add(out.engram.id)
        elif kind in ("recall", "search", "list"):
            query = None if kind == "list" else str(arg)
            mode = "recall" if kind == "recall" else kind
            seen = {r.engram.id for r in engine.recall(query, limit=20, mode=mode)}
            assert seen <= owned[user], f"{user} saw foreign memories {seen - owned[user]}"
            if kind == "list" and len(owned[user]) <= 20:
                assert seen == owned[user]
        elif kind == "forget":
            candidates = sorted(owned[other])
            if candidates:  # forgetting the other user's memory must fail loudly
                victim = candidates[int(arg) % len(candidates)]  # type: ignore[call-overload]
                with pytest.raises(NotFound):
                    engine.forget(victim)
            mine = sorted(owned[user])
            if mine:
                gone = mine[int(arg) % len(mine)]  # type: ignore[call-overload]
                engine.forget(gone)
                owned[user].discard(gone)
        else:
            before = pair.engines[other].backend.counts()
            engine.consolidate()
            assert pair.engines[other].backend.counts() == before
        for u in USERS:
            ids = {e.id for e in pair.engines[u].backend.iter_engrams()}
            assert ids == owned[u], f"{u}'s memories changed unexpectedly"


@pytest.mark.parametrize("isolation", ["tenant", "graph"])
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(op, min_size=1, max_size=14))
def test_users_never_see_each_other(pair_factory, isolation: str, ops) -> None:  # noqa: ANN001
    pair = pair_factory(isolation)
    try:
        run_ops(pair, ops)
    finally:
        pair.close()


def test_vector_hits_filtered_before_top_k(pair_factory) -> None:  # noqa: ANN001
    """Bob's only memory is found even when alice's near-duplicates fill the index."""
    pair = pair_factory("tenant")
    alice, bob = pair.engines["alice"], pair.engines["bob"]
    for i in range(60):
        alice.store(f"the zebra crossing number {i} near the river")
    alice.consolidate()  # passes INDEX_THRESHOLD: the shared HNSW index now exists
    mine = bob.store("a zebra crossing near the river").engram.id
    indexes = alice.backend._indexes
    assert indexes is not None and indexes._vector("Engram"), "no HNSW index was created"
    hits = bob.recall("zebra crossing river", mode="search", limit=5)
    assert [h.engram.id for h in hits] == [mine]
    hits = bob.recall("zebra crossing river", limit=5)
    assert {h.engram.id for h in hits} == {mine}
