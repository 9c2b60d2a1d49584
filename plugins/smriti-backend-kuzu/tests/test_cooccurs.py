"""Deferred CoOccurs counting: recorded with each memory, folded before every read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import kuzu
import pytest
from smriti_backend_kuzu.backend import DB_FILE, KuzuBackend
from smriti_embedded_graph import cooccurs, schema

from smriti.backend import BackendError, CoOccurrence
from smriti.testing import GraphBuilder

Factory = Callable[..., KuzuBackend]
build = GraphBuilder(8)


def pending_rows(backend: KuzuBackend) -> int:
    return int(backend.journal.query("MATCH (p:CoOccursQueue) RETURN count(p)")[0][0])


def strengths(backend: KuzuBackend) -> dict[tuple[str, str], float]:
    return {(c.source_id, c.target_id): c.strength for c in backend.iter_cooccurrences()}


def test_pending_rows_of_a_version_3_store_are_moved_and_folded(tmp_path: Path) -> None:
    # Version 3 kept them under a SERIAL key (CoOccursPending); version 4 under the
    # memory's id (CoOccursQueue), keys Kùzu never sees again once folded.
    path = tmp_path / "alice" / DB_FILE
    path.parent.mkdir(parents=True)
    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    assert schema.migrate(conn, target=3) == [1, 2, 3]
    for name in ("apple", "banana", "cherry"):
        conn.execute(
            "CREATE (:Cue {id: $id, name: $n, cue_type: 'keyword'})", {"id": f"c-{name}", "n": name}
        )
    for cues in (["c-apple", "c-banana", "c-cherry"], ["c-apple", "c-banana"]):
        conn.execute("CREATE (:CoOccursPending {cues: $c})", {"c": cues})
    conn.close()
    db.close()

    for _ in range(2):  # the second open finds nothing left to move
        backend = KuzuBackend("alice", path)
        backend.open()
        assert backend.get_meta(schema.SCHEMA_VERSION_KEY) == str(schema.CURRENT_VERSION)
        assert backend.journal.query("MATCH (p:CoOccursPending) RETURN count(p)") == [[0]]
        backend.close()
    backend = KuzuBackend("alice", path)
    backend.open()
    try:
        assert pending_rows(backend) == 2
        got = strengths(backend)
        assert got[("c-apple", "c-banana")] == 2.0 and got[("c-banana", "c-cherry")] == 1.0
        assert len(got) == 6 and pending_rows(backend) == 0
    finally:
        backend.close()


def test_pending_counts_survive_a_restart(kuzu_factory: Factory) -> None:
    a, b, c = build.cue("apple"), build.cue("banana"), build.cue("cherry")
    backend = kuzu_factory("alice")
    backend.add_memory(build.engram(1), [a, b, c], [])
    backend.add_memory(build.engram(2), [a, b], [])
    backend.add_memory(build.engram(3), [c], [])  # one cue: nothing to count
    assert pending_rows(backend) == 2
    backend.close()  # closing does not fold: the pending rows are durable

    reopened = kuzu_factory("alice")
    assert pending_rows(reopened) == 2
    got = strengths(reopened)
    assert pending_rows(reopened) == 0
    assert got == {
        (a.id, b.id): 2.0,
        (b.id, a.id): 2.0,
        (a.id, c.id): 1.0,
        (c.id, a.id): 1.0,
        (b.id, c.id): 1.0,
        (c.id, b.id): 1.0,
    }
    reopened.add_memory(build.engram(4), [c, b], [])
    assert reopened.counts()["cooccurrences"] == 6
    assert strengths(reopened)[(b.id, c.id)] == 2.0


def test_fold_runs_once_enough_memories_wait(
    kuzu_factory: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cooccurs, "FOLD_PENDING", 3)
    backend = kuzu_factory("alice")
    x, y = build.cue("x"), build.cue("y")
    for i in range(2):
        backend.add_memory(build.engram(i), [x, y], [])
    assert pending_rows(backend) == 2
    backend.add_memory(build.engram(2), [x, y], [])
    assert pending_rows(backend) == 0
    rows = backend.journal.query(
        "MATCH (a:Cue)-[r:CoOccurs]->(b:Cue) RETURN a.id, b.id, r.strength"
    )
    assert sorted(map(tuple, rows)) == sorted([(x.id, y.id, 3.0), (y.id, x.id, 3.0)])


def test_import_replaces_pending_counts(kuzu_factory: Factory) -> None:
    """An imported strength is the value, as if the pending counts had been applied first."""
    backend = kuzu_factory("alice")
    x, y = build.cue("x"), build.cue("y")
    backend.add_memory(build.engram(1), [x, y], [])
    backend.import_records([], [], [], [], [CoOccurrence(x.id, y.id, 7.0)])
    assert pending_rows(backend) == 0
    assert strengths(backend) == {(x.id, y.id): 7.0, (y.id, x.id): 1.0}


def test_orphan_cues_take_their_pending_pairs_along(kuzu_factory: Factory) -> None:
    backend = kuzu_factory("alice")
    keep, gone = build.cue("keep"), build.cue("gone")
    backend.add_memory(build.engram(1), [keep, gone], [])
    backend.add_memory(build.engram(2), [keep], [])
    backend.delete_engrams([build.engram(1).id])
    assert backend.delete_orphan_cues() == 1
    assert strengths(backend) == {}
    # a later memory with a cue of that name starts counting afresh
    backend.add_memory(build.engram(3), [keep, build.cue("gone", seed=2)], [])
    assert sorted(strengths(backend).values()) == [1.0, 1.0]


def test_failed_store_records_nothing(kuzu_factory: Factory) -> None:
    backend = kuzu_factory("alice")
    x, y = build.cue("x"), build.cue("y")
    backend.add_memory(build.engram(1), [x, y], [])
    other = build.engram(1, content="different text, same id")
    with pytest.raises(BackendError):
        backend.add_memory(other, [x, y, build.cue("z")], [])
    assert pending_rows(backend) == 1
    assert backend.cooccurs.pending == 1
    assert strengths(backend) == {(x.id, y.id): 1.0, (y.id, x.id): 1.0}


@pytest.mark.parametrize("new", [0, 1, 3])
@pytest.mark.parametrize("known", [0, 1, 2])
@pytest.mark.parametrize("targets", [0, 1, 3])
def test_every_shape_of_store(kuzu_factory: Factory, new: int, known: int, targets: int) -> None:
    """A store writes exactly what the memory holds: new and known cues, pairs, targets."""
    from smriti.backend import Association

    backend = kuzu_factory("alice")
    old_cues = [build.cue(f"old{i}") for i in range(2)]
    for i in range(3):
        backend.add_memory(build.engram(i), old_cues if i == 0 else [], [])
    cues = [build.cue(f"new{i}") for i in range(new)] + old_cues[:known]
    edges = [Association("e00100", build.engram(i).id, 0.5 + i / 10) for i in range(targets)]
    edges.append(Association("e00100", "no-such-engram", 0.9))  # skipped, not an error
    stored = backend.add_memory(build.engram(100), cues, edges)
    assert [c.name for c in stored.cues] == [c.name for c in cues]
    backend.close()

    store = kuzu_factory("alice")  # the raw backend reads Kùzu
    [engram] = store.get_engrams(["e00100"])
    assert engram.content == build.engram(100).content
    assert sorted(link.cue_id for link in store.reader.cues_of(["e00100"])) == sorted(
        c.id for c in cues
    )
    got = {
        (a.target_id, round(a.strength, 3)) for a in store.reader.associations_of(["e00100"], 10)
    }
    assert got == {(build.engram(i).id, round(0.5 + i / 10, 3)) for i in range(targets)}
    want = {(a.id, b.id) for a in cues for b in cues if a != b}
    want |= {(old_cues[0].id, old_cues[1].id), (old_cues[1].id, old_cues[0].id)}
    assert {(c.source_id, c.target_id) for c in store.iter_cooccurrences()} == want


def test_an_association_to_itself_is_stored(kuzu_factory: Factory) -> None:
    from smriti.backend import Association

    backend = kuzu_factory("alice")
    backend.add_memory(build.engram(1), [], [])
    edges = [Association("e00002", "e00002", 0.5), Association("e00002", "e00001", 0.7)]
    backend.add_memory(build.engram(2), [build.cue("x")], edges)
    got = {(a.source_id, a.target_id) for a in backend.iter_associations()}
    assert got == {("e00002", "e00002"), ("e00002", "e00001")}
