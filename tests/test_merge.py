"""Merging snapshots on real Kùzu stores: tombstones, newer-version-wins, versions,
convergence; and the version rules on graphs held in memory."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from itertools import permutations
from pathlib import Path

from smriti.engine import Engine
from smriti.model import Association, Engram, EngramUpdate, utcnow
from smriti.portable import canonical_hash, export_store, import_store
from smriti.portable.canonical import engram_digest
from smriti.portable.merge import Graph, merge_snapshot, merged_graph
from smriti.portable.tombstones import FORGET, PRUNE, Tombstone, load
from smriti.testing.backup_suite import memory_texts
from smriti.testing.builders import T0, GraphBuilder

from .conftest import EngineFactory


def ids(engine: Engine) -> set[str]:
    return {e.id for e in engine.backend.iter_engrams()}


def copy_of(source: Engine, engine_factory: EngineFactory, user: str, path: Path) -> Engine:
    export_store(source, path)
    target = engine_factory(user)
    import_store(target, path)
    return target


def test_a_forget_travels_in_the_export_and_is_honoured_on_import(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    alice = engine_factory("alice")
    stored = [alice.store(t).engram.id for t in memory_texts(3)]
    laptop = copy_of(alice, engine_factory, "bob", tmp_path / "before.jsonl")
    alice.forget(stored[0])
    assert set(load(alice.backend)) == {stored[0]}
    assert load(alice.backend)[stored[0]].kind == FORGET
    after = tmp_path / "after.jsonl"
    report = export_store(alice, after)
    assert report.tombstones == 1
    records = [json.loads(line) for line in after.read_text().splitlines()]
    assert records[1]["kind"] == "tombstone" and records[1]["id"] == stored[0]
    assert records[-1]["tombstones"] == 1
    imported = import_store(laptop, after, merge=True)
    assert imported.tombstones == 1 and imported.forgotten == 1
    assert ids(laptop) == set(stored[1:]), "the forgotten memory was kept"
    import_store(laptop, tmp_path / "before.jsonl", merge=True)  # the stale copy again
    assert ids(laptop) == set(stored[1:]), "a tombstoned memory was re-added"
    fresh = engine_factory("carol")
    import_store(fresh, tmp_path / "before.jsonl")
    import_store(fresh, after, merge=True)
    assert ids(fresh) == set(stored[1:])


def test_merging_both_ways_converges_and_the_newer_version_wins(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    a = engine_factory("alice")
    texts = memory_texts(12)
    base = [a.store(t).engram.id for t in texts[:6]]
    b = copy_of(a, engine_factory, "bob", tmp_path / "base.jsonl")
    later = utcnow() + timedelta(seconds=5)
    b.backend.update_engrams([EngramUpdate(base[0], access_count=3, last_accessed_at=later)])
    a.backend.update_engrams([EngramUpdate(base[0], importance=0.9)])  # older edit, same id
    a.forget(base[1])
    b.forget(base[2])
    only_a = {a.store(t).engram.id for t in texts[6:9]}
    only_b = {b.store(t).engram.id for t in texts[9:]}
    export_store(a, tmp_path / "a.jsonl")
    export_store(b, tmp_path / "b.jsonl")
    merge_snapshot(a, tmp_path / "b.jsonl")
    merge_snapshot(b, tmp_path / "a.jsonl")
    want = (set(base) - {base[1], base[2]}) | only_a | only_b
    assert ids(a) == ids(b) == want
    assert canonical_hash(a) == canonical_hash(b)
    assert load(a.backend) == load(b.backend)
    for engine in (a, b):
        winner = engine.backend.get_engrams([base[0]])[0]
        assert (winner.access_count, winner.importance) == (3, 0.5), "the older version won"
    again = merge_snapshot(a, tmp_path / "b.jsonl")  # idempotent
    assert not again.changed


def test_a_prune_kills_copies_of_the_pruned_version_but_not_one_used_since(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    a = engine_factory("alice")
    weak = [a.store(t, importance=0.1).engram.id for t in memory_texts(3)]
    long_ago = utcnow() - timedelta(days=400)
    a.backend.update_engrams([EngramUpdate(i, last_accessed_at=long_ago) for i in weak])
    b = copy_of(a, engine_factory, "bob", tmp_path / "base.jsonl")
    used = utcnow()
    b.backend.update_engrams([EngramUpdate(weak[0], access_count=1, last_accessed_at=used)])
    assert a.consolidate().pruned == 3
    assert {t.kind for t in load(a.backend).values()} == {PRUNE}
    export_store(a, tmp_path / "a.jsonl")
    export_store(b, tmp_path / "b.jsonl")
    merge_snapshot(b, tmp_path / "a.jsonl")
    assert ids(b) == {weak[0]}, "the pruned copies survived, or the one used since did not"
    merge_snapshot(a, tmp_path / "b.jsonl")
    assert ids(a) == {weak[0]}
    assert canonical_hash(a) == canonical_hash(b)


# -- versions --------------------------------------------------------------------------------
def test_corrections_on_two_machines_merge_both_ways_to_one_history(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    a = engine_factory("alice")
    build = GraphBuilder(a.embedder.dims)
    a.backend.import_records([build.engram(i) for i in range(1, 6)], [], [], [], [])
    b = copy_of(a, engine_factory, "bob", tmp_path / "base.jsonl")
    t_a, t_b = T0 + timedelta(days=1), T0 + timedelta(days=2)
    # Both machines corrected e00001 before syncing, alice first.
    correct(a, "e00001", build.engram(11, supersedes="e00001"), t_a)
    correct(b, "e00001", build.engram(12, supersedes="e00001"), t_b)
    # Only bob corrected e00002; alice forgot e00003, which bob corrected meanwhile.
    correct(b, "e00002", build.engram(13, supersedes="e00002"), t_b)
    correct(b, "e00003", build.engram(14, supersedes="e00003"), t_b)
    a.forget("e00003")
    # Tags set by update follow the version rule: bob's edit came with a later access.
    later = utcnow() + timedelta(seconds=5)
    a.backend.update_engrams([EngramUpdate("e00004", tags=["ocelot"])])
    b.backend.update_engrams(
        [EngramUpdate("e00004", tags=["margay"], access_count=9, last_accessed_at=later)]
    )
    export_store(a, tmp_path / "a.jsonl")
    export_store(b, tmp_path / "b.jsonl")
    merge_snapshot(a, tmp_path / "b.jsonl")
    merge_snapshot(b, tmp_path / "a.jsonl")
    want = {"e00001", "e00002", "e00004", "e00005", "e00011", "e00012", "e00013", "e00014"}
    assert ids(a) == ids(b) == want, "the forgotten memory came back, or a version was lost"
    assert canonical_hash(a) == canonical_hash(b)
    for engine in (a, b):
        got = {e.id: e for e in engine.backend.iter_engrams()}
        assert (got["e00001"].superseded_by, got["e00001"].superseded_at) == ("e00011", t_a)
        assert got["e00002"].superseded_by == "e00013", "the supersession was not sticky"
        assert [got[i].supersedes for i in ("e00011", "e00012")] == ["e00001", "e00001"]
        assert got["e00011"].superseded_by == got["e00012"].superseded_by == ""
        assert got["e00004"].tags == ["margay"]
        assert got["e00005"].superseded_by == ""
    assert not merge_snapshot(a, tmp_path / "b.jsonl").changed  # idempotent


def correct(engine: Engine, old: str, new: Engram, at: datetime) -> None:
    """What a correction writes: the new version and its edge, then the old one marked."""
    edge = Association(new.id, old, 1.0, "supersedes", at)
    engine.backend.import_records([new], [], [], [edge], [])
    engine.backend.update_engrams([EngramUpdate(old, superseded_by=new.id, superseded_at=at)])


def graph(*engrams: Engram, stones: tuple[Tombstone, ...] = ()) -> Graph:
    return Graph(engrams={e.id: e for e in engrams}, stones={t.id: t for t in stones})


def digests(g: Graph) -> dict[str, str]:
    return {k: engram_digest(e) for k, e in g.engrams.items()}


BUILD = GraphBuilder(8)
OLD = BUILD.engram(1)


def test_supersession_is_sticky_whichever_side_won_the_other_properties() -> None:
    marked = OLD.with_changes(superseded_by="e00009", superseded_at=T0 + timedelta(days=1))
    used = OLD.with_changes(access_count=7, last_accessed_at=T0 + timedelta(days=3))
    for local, remote in ((marked, used), (used, marked)):
        got = merged_graph(graph(local), graph(remote)).engrams[OLD.id]
        assert (got.superseded_by, got.superseded_at) == ("e00009", marked.superseded_at)
        assert got.access_count == 7, "the later used version lost its other properties"


def test_two_successors_the_earlier_correction_wins_then_the_smaller_id() -> None:
    day = T0 + timedelta(days=1)
    cases = [
        (("e00009", day + timedelta(hours=1)), ("e00008", day + timedelta(hours=2)), "e00009"),
        (("e00009", day), ("e00008", day), "e00008"),
        (("e00007", day), ("e00008", None), "e00007"),  # a successor without a time loses
    ]
    for (id_x, at_x), (id_y, at_y), winner in cases:
        x = OLD.with_changes(superseded_by=id_x, superseded_at=at_x)
        y = OLD.with_changes(superseded_by=id_y, superseded_at=at_y)
        new_x, new_y = BUILD.engram(20, supersedes=OLD.id), BUILD.engram(21, supersedes=OLD.id)
        for local, remote in (
            (graph(x, new_x), graph(y, new_y)),
            (graph(y, new_y), graph(x, new_x)),
        ):
            got = merged_graph(local, remote)
            assert got.engrams[OLD.id].superseded_by == winner
            assert {new_x.id, new_y.id} <= set(got.engrams), "a correction was dropped"


def test_a_tombstone_wins_over_a_supersession() -> None:
    marked = OLD.with_changes(superseded_by="e00009", superseded_at=T0 + timedelta(days=1))
    stone = Tombstone(OLD.id, FORGET, T0)
    successor = BUILD.engram(9, supersedes=OLD.id)
    got = merged_graph(graph(marked, successor), graph(stones=(stone,)))
    assert set(got.engrams) == {successor.id}
    assert got.engrams[successor.id].supersedes == OLD.id


def test_the_version_rules_are_commutative_associative_and_idempotent() -> None:
    sides = [
        graph(OLD.with_changes(superseded_by="e00009", superseded_at=T0 + timedelta(days=2))),
        graph(OLD.with_changes(access_count=5, tags=["edited"])),
        graph(OLD.with_changes(superseded_by="e00008", superseded_at=T0 + timedelta(days=1))),
    ]
    results = set()
    for x, y, z in permutations(sides):
        left = merged_graph(merged_graph(x, y), z)
        right = merged_graph(x, merged_graph(y, z))
        assert digests(left) == digests(right)
        assert digests(merged_graph(left, left)) == digests(left)
        results.add(tuple(sorted(digests(left).items())))
    assert len(results) == 1
    got = merged_graph(merged_graph(sides[0], sides[1]), sides[2]).engrams[OLD.id]
    assert (got.superseded_by, got.access_count, got.tags) == ("e00008", 5, ["edited"])
