"""Merging snapshots on real Kùzu stores: tombstones, newer-version-wins, convergence."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from smriti.engine import Engine
from smriti.model import EngramUpdate, utcnow
from smriti.portable import canonical_hash, export_store, import_store
from smriti.portable.merge import merge_snapshot
from smriti.portable.tombstones import FORGET, PRUNE, load
from smriti.testing.backup_suite import memory_texts

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
