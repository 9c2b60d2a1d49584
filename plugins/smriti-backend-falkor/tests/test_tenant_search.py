"""Tenant mode: index hits are filtered by user before the top-k cut, in every regime."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from smriti_backend_falkor.backend import FalkorBackend

from smriti.reads import Seek
from smriti.storage import unit
from smriti.testing import GraphBuilder

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
