"""Tenant mode: index hits are filtered by user before the top-k cut, in every regime."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from smriti_backend_falkor.backend import FalkorBackend

from smriti.backend import Association, Cue, Link, Seek, unit
from smriti.testing import T0, GraphBuilder

DIMS = 16
build = GraphBuilder(DIMS)


@pytest.mark.parametrize("bob_count", [3, 300])
def test_crowded_out_user_still_gets_exact_top_k(
    make_backend: Callable[..., FalkorBackend], bob_count: int
) -> None:
    query = build.vec(1)
    alice, bob = make_backend("alice"), make_backend("bob")
    # alice's 1500 vectors all sit right next to the query; bob's are further away.
    alice.import_records(
        [build.engram(i, embedding=build.near(query, i, 0.05)) for i in range(1500)], [], [], [], []
    )
    bobs = [build.engram(i, embedding=build.near(query, 10_000 + i, 1.0)) for i in range(bob_count)]
    bob.import_records(bobs, [], [], [], [])
    assert alice.ensure_indexes(DIMS, 50)
    alice.wait_for_indexes()
    assert bob._indexes is not None
    bob._indexes.refresh()
    assert bob._indexes.vector_ready("Engram", DIMS)
    got = bob.seek(Seek(10, query)).vector
    scores = np.stack([unit(e.embedding) for e in bobs]) @ unit(query)  # type: ignore[arg-type]
    want = [bobs[i].id for i in np.argsort(-scores, kind="stable")[:10]]
    assert [i for i, _ in got] == want
    assert [s for _, s in got] == pytest.approx(sorted(scores, reverse=True)[:10], abs=1e-4)
    text = bob.seek(Seek(500, text="memory")).text
    assert text and all(i in {e.id for e in bobs} for i, _ in text)


def test_crowded_out_user_still_gets_the_nearest_cues(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """The cue index is shared too: alice's 300 cues next to the query fill every fetch."""
    query = build.vec(1)
    alice, bob = make_backend("alice"), make_backend("bob")
    crowd = [Cue(f"a{i}", f"a{i}", "keyword", build.near(query, i, 0.05)) for i in range(300)]
    alice.import_records([build.engram(0)], crowd, [], [], [])
    mine = [Cue(f"b{i}", f"b{i}", "keyword", build.near(query, 1000 + i, 0.3)) for i in range(3)]
    bobs = [build.engram(500 + i) for i in range(5)]
    bob.import_records(bobs, mine, [Link(e.id, c.id) for e in bobs for c in mine], [], [])
    assert alice.ensure_indexes(DIMS, 0)
    alice.wait_for_indexes()
    assert bob._indexes is not None
    bob._indexes.refresh()
    assert bob._indexes.vector_ready("Cue", DIMS)
    seeds = bob.seek(
        Seek(3, cue_vectors=query[None, :], cue_neighbours=3, cue_similarity=0.5, cue_fanout=2)
    )
    sims = {c.id: float(unit(c.embedding) @ unit(query)) for c in mine}  # type: ignore[arg-type]
    want = sorted((i for i, s in sims.items() if s >= 0.5), key=lambda i: -sims[i])
    assert want and [c.cue_id for c in seeds.cues] == want
    assert [c.similarity for c in seeds.cues] == pytest.approx([sims[i] for i in want], abs=1e-4)
    assert all(c.degree == 5 and len(c.engrams) == 2 for c in seeds.cues)


def test_working_set_streams_hold_exactly_the_users_records(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """The internal-id windows of ``working_set_streams`` cross window boundaries and
    see only their user's nodes of a shared graph, with the same records as ``iter_*``."""
    g = GraphBuilder(8)
    alice, bob = make_backend("alice"), make_backend("bob")
    alice.id_window = 3  # type: ignore[misc]
    for i in range(12):
        owner = alice if i % 3 else bob
        owner.add_memory(g.engram(i), [g.cue(f"c{i % 4}"), g.cue("shared")], [])
    alice.add_memory(
        g.engram(99), [g.cue("c1")], [Association("e00099", "e00001", 0.9, "semantic", T0)]
    )
    cues, engrams, links, assocs = alice.working_set_streams()
    assert sorted(c.id for c in cues) == sorted(c.id for c in alice.iter_cues())
    found = sorted(engrams, key=lambda e: e.id)
    expected = list(alice.iter_engrams())
    assert [e.with_changes(embedding=None) for e in found] == [
        e.with_changes(embedding=None) for e in expected
    ]
    pairs = zip(found, expected, strict=True)
    assert all(np.array_equal(a.embedding, b.embedding) for a, b in pairs)
    assert sorted(links, key=lambda x: (x.engram_id, x.cue_id)) == sorted(
        alice.iter_links(), key=lambda x: (x.engram_id, x.cue_id)
    )
    assert [(a.source_id, a.target_id) for a in assocs] == [("e00099", "e00001")]
    assert not {e.id for e in found} & {e.id for e in bob.iter_engrams()}
