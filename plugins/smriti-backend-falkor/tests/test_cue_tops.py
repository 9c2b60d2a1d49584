"""A cue's most important engrams come from its top list (``queries.CUE_TOP``) when the
list is fresh and from a scan of its members otherwise; both must give the same answer
through stores, deletes, importance changes, bulk imports and migration."""

from __future__ import annotations

from collections.abc import Callable

from smriti_backend_falkor import queries as Q
from smriti_backend_falkor.backend import SCHEMA_VERSION, FalkorBackend

from smriti.backend import EngramUpdate, Expand, Link, Seek
from smriti.testing import GraphBuilder

build = GraphBuilder(8)
HUB = build.cue("hub")
FANOUT = 50


def importance(i: int) -> float:
    """Many ties, so the id order inside a tie matters."""
    return round(0.1 + (i * 37 % 11) / 12, 3)


def expected(members: dict[str, float], n: int = FANOUT) -> list[str]:
    """The ``n`` most important of ``members`` (engram id -> importance), ties by id."""
    return [e for e, _ in sorted(members.items(), key=lambda m: (-m[1], m[0]))][:n]


def hub_engrams(backend: FalkorBackend) -> list[str]:
    [match] = backend.seek(Seek(k=0, cue_names=["hub"], cue_fanout=FANOUT)).cues
    return [e for e, _ in match.engrams]


def fresh(backend: FalkorBackend) -> bool:
    rows = backend._read(
        "MATCH (q:Cue {user: $user, key: 'hub'})-[d:Degree]->(q) RETURN d.fresh, size(d.top)"
    )
    return bool(rows[0][0])


def stored_hub(backend: FalkorBackend, count: int) -> dict[str, float]:
    members = {}
    for i in range(count):
        engram = build.engram(i, importance=importance(i))
        backend.add_memory(engram, [HUB], [])
        members[engram.id] = engram.importance
    return members


def test_stores_keep_the_top_list_exact(make_backend: Callable[..., FalkorBackend]) -> None:
    backend = make_backend("alice")
    members = stored_hub(backend, Q.CUE_TOP + 40)
    assert fresh(backend)
    assert hub_engrams(backend) == expected(members)
    # The answer is read from the list (here rewritten to tell it from a scan) ...
    backend._write(
        "MATCH (q:Cue {user: $user, key: 'hub'})-[d:Degree]->(q) SET d.top = [['listed', 1.0, 0.5]]"
    )
    assert hub_engrams(backend) == ["listed"]
    # ... and a fanout beyond the list by the scan.
    [match] = backend.seek(Seek(k=0, cue_names=["hub"], cue_fanout=Q.CUE_TOP + 10)).cues
    assert [e for e, _ in match.engrams] == expected(members, Q.CUE_TOP + 10)


def test_deletes_and_importance_changes(make_backend: Callable[..., FalkorBackend]) -> None:
    backend = make_backend("alice")
    members = stored_hub(backend, Q.CUE_TOP + 40)
    doomed = expected(members, 5) + [sorted(members)[-1]]
    backend.delete_engrams(doomed)
    for e in doomed:
        del members[e]
    assert fresh(backend)  # rebuilt after a delete from the full list
    assert hub_engrams(backend) == expected(members)
    last = sorted(members, key=lambda e: (members[e], e))[0]  # the least important
    backend.update_engrams([EngramUpdate(last, importance=0.99)])
    members[last] = 0.99
    assert fresh(backend)
    assert hub_engrams(backend) == expected(members)


def test_bulk_import_is_read_by_scan_then_rebuilt(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice")
    members = stored_hub(backend, 30)
    [hub] = backend.get_cues(["hub"])
    engrams = [build.engram(i, importance=importance(i)) for i in range(100, 200)]
    backend.import_records(engrams, [], [Link(e.id, hub.id, 0.5) for e in engrams], [], [])
    members.update({e.id: e.importance for e in engrams})
    assert not fresh(backend)
    assert hub_engrams(backend) == expected(members)
    backend.ensure_indexes(8, 10_000)
    assert fresh(backend)
    assert hub_engrams(backend) == expected(members)
    strengths = dict(backend.seek(Seek(k=0, cue_names=["hub"], cue_fanout=FANOUT)).cues[0].engrams)
    assert {strengths[e.id] for e in engrams if e.id in strengths} == {0.5}


def test_neighbourhood_members_of_a_small_cue(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice")
    members = stored_hub(backend, 12)
    around = backend.neighbourhood(Expand(["e00000"], 0, cue_max_degree=20, engrams_per_cue=5))
    assert [e for e, _ in around.members[HUB.id]] == expected(members, 5)
    backend.delete_engrams(expected(members, 1))
    del members[expected(members, 1)[0]]
    around = backend.neighbourhood(Expand(["e00001"], 0, cue_max_degree=20, engrams_per_cue=5))
    assert [e for e, _ in around.members[HUB.id]] == expected(members, 5)


def test_stores_from_before_the_top_lists_are_migrated(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice")
    members = stored_hub(backend, Q.CUE_TOP + 5)
    backend._write("MATCH (q:Cue {user: $user})-[d:Degree]->(q) SET d.top = null, d.fresh = null")
    backend.set_meta("falkordb.schema_version", "2")
    assert hub_engrams(backend) == expected(members)  # no list: the scan answers
    backend.close()
    reopened = make_backend("alice")
    assert reopened.get_meta("falkordb.schema_version") == SCHEMA_VERSION
    assert fresh(reopened)
    assert hub_engrams(reopened) == expected(members)


def test_a_large_delete_leaves_the_rebuild_to_ensure_indexes(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice")
    backend.top_statements = 0  # type: ignore[misc]  # as if the delete touched many cues
    members = stored_hub(backend, Q.CUE_TOP + 10)
    doomed = expected(members, 3)
    backend.delete_engrams(doomed)
    for e in doomed:
        del members[e]
    assert not fresh(backend)
    assert hub_engrams(backend) == expected(members)
    backend.ensure_indexes(8, 10_000)
    assert fresh(backend)
    assert hub_engrams(backend) == expected(members)
