"""Kùzu-specific behaviour: locking, corrupt files, migrations, threads, registration,
indexes, settings, and the working set's load."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import kuzu
import numpy as np
import pytest
from smriti_backend_kuzu.backend import DB_FILE, KuzuBackend
from smriti_embedded_graph import schema
from smriti_embedded_graph.codec import engram_params, vec_in
from structlog.testing import capture_logs

from smriti import ConfigError
from smriti.backend import (
    Association,
    BackendError,
    CoOccurrence,
    EngramUpdate,
    Expand,
    Link,
    Listing,
    Seek,
    StoreLockedError,
)
from smriti.config import Settings
from smriti.engine.components import choose_backend
from smriti.index.indexed import IndexedBackend
from smriti.plugins import Registry, create_plugin_manager
from smriti.testing import GraphBuilder

Factory = Callable[..., KuzuBackend]
build = GraphBuilder(8)


def test_second_process_gets_store_locked_error(kuzu_factory: Factory) -> None:
    backend = kuzu_factory("alice")
    backend.add_memory(build.engram(1), [], [])
    script = textwrap.dedent(
        f"""
        import sys
        from smriti.backend import StoreLockedError
        from smriti_backend_kuzu.backend import KuzuBackend
        try:
            KuzuBackend("alice", {str(backend.path)!r}).open()
        except StoreLockedError as exc:
            print(exc)
            sys.exit(3)
        sys.exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stderr
    assert str(backend.path) in done.stdout and "another process" in done.stdout
    assert backend.count_engrams() == 1  # the holder is unaffected


@pytest.mark.parametrize(
    "content", [b"this is not a database\n" * 200, b"", b"\x00" * 4096 + b"KUZU" * 100]
)
def test_foreign_file_is_reported_and_left_alone(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "alice" / DB_FILE
    path.parent.mkdir()
    path.write_bytes(content)
    digest = hashlib.sha256(content).hexdigest()
    backend = KuzuBackend("alice", path)
    if content:
        with pytest.raises(BackendError, match=str(path)) as info:
            backend.open()
        assert not isinstance(info.value, StoreLockedError)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
        assert sorted(p.name for p in path.parent.iterdir()) == [DB_FILE]
    else:  # an empty file is what a crash before the first write leaves: it is a new store
        backend.open()
        assert backend.count_engrams() == 0
        backend.close()


def test_truncated_database_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    backend = KuzuBackend("alice", path)
    backend.open()
    backend.import_records([build.engram(i) for i in range(50)], [], [], [], [])
    backend.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(BackendError, match=str(path)):
        KuzuBackend("alice", path).open()


def test_directory_in_place_of_database(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    path.mkdir(parents=True)
    with pytest.raises(BackendError, match="is a directory"):
        KuzuBackend("alice", path).open()


def _make_v1_store(path: Path) -> None:
    """A store as version 1 of the schema made it (no cluster_id, no tags_text)."""
    path.parent.mkdir(parents=True)
    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    assert schema.migrate(conn, target=1) == [1]
    conn.execute(
        "CREATE (:Engram {id: 'old', content: 'written long ago', summary: 's', "
        "memory_type: 'semantic', importance: 0.4, access_count: 2, "
        "created_at: $t, last_accessed_at: $t, decay_factor: 0.9, source: 'v1', "
        "tags: ['vintage', 'wine']})",
        {"t": datetime(2023, 5, 1, 8, 30)},
    )
    conn.close()
    db.close()


def test_old_schema_is_migrated_idempotently(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    _make_v1_store(path)
    for cluster in (-1, 4):  # the second open finds nothing to migrate
        backend = KuzuBackend("alice", path)
        backend.open()
        [old] = backend.get_engrams(["old"])
        assert old.cluster_id == cluster and old.tags == ["vintage", "wine"]
        assert old.created_at.tzinfo is not None and old.created_at.hour == 8
        assert [i for i, _ in backend.reader.text_search("vintage", 3)] == ["old"]
        assert backend.get_meta(schema.SCHEMA_VERSION_KEY) == str(schema.CURRENT_VERSION)
        backend.update_engrams([EngramUpdate("old", cluster_id=4)])
        backend.close()
    assert schema.CURRENT_VERSION >= 2


def _make_v4_store(path: Path) -> None:
    """A store as schema version 4 left it: no version fields on Engram, a full-text
    index over it (a session without a working set), and a memory still in the journal
    as the previous version wrote its lines."""
    path.parent.mkdir(parents=True)
    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    assert schema.migrate(conn, target=4) == [1, 2, 3, 4]
    columns = {r[1] for r in conn.execute("CALL TABLE_INFO('Engram') RETURN *").get_all()}
    assert "superseded_by" not in columns and "cluster_id" in columns
    conn.execute(
        "CREATE (:Engram {id: 'old', content: 'written before corrections', summary: 's', "
        "memory_type: 'semantic', importance: 0.4, access_count: 2, created_at: $t, "
        "last_accessed_at: $t, decay_factor: 0.9, embedding: $v, source: 'v4', "
        "tags: ['vintage'], tags_text: 'vintage', cluster_id: 3})",
        {"t": datetime(2024, 5, 1, 8, 30), "v": vec_in(np.ones(8, dtype=np.float32))},
    )
    conn.execute("LOAD fts")
    conn.execute(
        "CALL CREATE_FTS_INDEX('Engram', 'engram_fts', ['content', 'summary', 'tags_text'])"
    )
    conn.close()
    db.close()
    queued = build.engram(7, tags=["cellar"])
    newer = ("supersede", "origin", "principal")  # fields the journal lines then lacked
    row = {k: v for k, v in engram_params(queued).items() if not k.startswith(newer)}
    row.update({k: row[k].isoformat() for k in ("created_at", "last_accessed_at")})
    line = {"row": row, "new_cues": [], "cue_ids": [], "assoc": []}
    path.with_name(path.name + ".journal").write_text(json.dumps(line) + "\n")


def test_store_without_version_fields_is_migrated_and_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    _make_v4_store(path)
    with capture_logs() as logs:
        backend = KuzuBackend("alice", path, native_indexes=True)
        backend.open()
    assert [e["versions"] for e in logs if e["event"] == "schema migrated"] == [[5, 6]]
    try:
        [old] = backend.get_engrams(["old"])
        assert (old.supersedes, old.superseded_by, old.superseded_at) == ("", "", None)
        assert (old.content, old.source, old.tags, old.cluster_id) == (
            "written before corrections",
            "v4",
            ["vintage"],
            3,
        )
        assert old.access_count == 2 and old.created_at == datetime(2024, 5, 1, 8, 30, tzinfo=UTC)
        assert old.embedding is not None and old.embedding.tolist() == [1.0] * 8
        [queued] = backend.get_engrams(["e00007"])  # the old journal line, replayed
        assert (queued.tags, queued.superseded_by, queued.superseded_at) == (["cellar"], "", None)
        # Who said them is unknown (''), not guessed.
        assert (old.origin, old.principal, queued.origin, queued.principal) == ("",) * 4
        current_origin = build.engram(8, origin="user", principal="key:k1")
        backend.add_memory(current_origin, [], [])
        assert [e.id for e in backend.list_page(Listing(10, origin="user"))] == ["e00008"]
        assert [i for i, _ in backend.reader.text_search("vintage", 3)] == ["old"]
        current = Listing(10, include_superseded=False)
        assert {e.id for e in backend.list_page(current)} == {"old", "e00007", "e00008"}
        when = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        backend.update_engrams([EngramUpdate("old", superseded_by="e00007", superseded_at=when)])
    finally:
        backend.close()
    # A crash after the columns were added but before the version was recorded: the
    # migration runs again and changes nothing.
    db = kuzu.Database(str(path))
    kuzu.Connection(db).execute("MATCH (m:Meta {key: 'schema_version'}) SET m.value = '4'")
    db.close()
    for _ in range(2):
        backend = KuzuBackend("alice", path)
        backend.open()
        try:
            [old] = backend.get_engrams(["old"])
            assert (old.superseded_by, old.superseded_at) == ("e00007", when)
            assert [e.id for e in backend.list_page(current)] == ["e00008", "e00007"]
            [said] = backend.get_engrams(["e00008"])
            assert (said.origin, said.principal) == ("user", "key:k1")
            assert backend.get_meta(schema.SCHEMA_VERSION_KEY) == str(schema.CURRENT_VERSION)
        finally:
            backend.close()
    assert schema.CURRENT_VERSION == 6


def test_threads_store_and_read_concurrently(kuzu_factory: Factory) -> None:
    backend = kuzu_factory("alice")
    errors: list[BaseException] = []

    def writer(offset: int) -> None:
        try:
            for i in range(offset, offset + 40):
                backend.add_memory(build.engram(i), [build.cue(f"w{i % 5}")], [])
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    def reader() -> None:
        try:
            for i in range(60):
                backend.reader.vector_search(build.vec(i), 5)
                backend.reader.text_search("memory", 5)
                backend.list_page(Listing(5))
                backend.count_engrams()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n * 100,)) for n in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert backend.count_engrams() == 120
    assert backend.counts()["cues"] == 5
    assert len(backend.reader.vector_search(build.vec(1), 200)) == 120


@pytest.mark.parametrize("by_key", [True, False])
def test_links_by_key_and_by_join_write_the_same_edges(
    kuzu_factory: Factory, monkeypatch: pytest.MonkeyPatch, by_key: bool
) -> None:
    """Both ways of linking a memory's cues (chosen by the Cue table's size) link each
    cue once: new and existing cues, one cue, many cues."""
    from smriti_embedded_graph import rows

    monkeypatch.setattr(rows, "link_by_key", lambda links, cues: by_key)
    backend = kuzu_factory("alice")
    want: set[tuple[str, str]] = set()
    for i, names in enumerate([["a"], ["a", "b", "c"], [f"n{j}" for j in range(14)], ["b", "z"]]):
        engram = build.engram(i)
        stored = backend.add_memory(engram, [build.cue(n) for n in names], [])
        want |= {(engram.id, c.id) for c in stored.cues}
    assert len(want) == 1 + 3 + 14 + 2
    backend.close()
    reopened = kuzu_factory("alice")  # read back from the store
    assert {(link.engram_id, link.cue_id) for link in reopened.iter_links()} == want
    assert reopened.counts()["links"] == len(want)


def test_link_statement_choice_follows_the_cue_table_size() -> None:
    from smriti_embedded_graph.rows import link_by_key

    assert link_by_key(6, 200_000) and link_by_key(1, 0)
    assert not link_by_key(6, 5_000) and not link_by_key(12, 20_000)


def test_vector_index_used_without_a_working_set(kuzu_factory: Factory) -> None:
    backend = kuzu_factory("alice", native_indexes=True)
    backend.import_records([build.engram(i) for i in range(80)], [], [], [], [])
    assert sorted(backend.ensure_indexes(8, 50)) == ["engram_fts", "engram_vec"]
    assert {"engram_fts", "engram_vec"} <= backend.reader.index_names()
    hits = backend.reader._hnsw_search(build.vec(10_005), 3, None)
    assert hits is not None and hits[0][0] == "e00005"
    backend.delete_engrams(["e00005"])
    assert "e00005" not in [i for i, _ in backend.reader.vector_search(build.vec(10_005), 3)]


def test_for_a_working_set_no_index_is_built_and_a_stale_text_index_dropped(
    kuzu_factory: Factory,
) -> None:
    """The working set serves text and vector search; an FTS index would slow writes."""
    backend = kuzu_factory("alice", native_indexes=True)
    backend.import_records([build.engram(i) for i in range(60)], [], [], [], [])
    assert sorted(backend.ensure_indexes(8, 50)) == ["engram_fts", "engram_vec"]
    backend.close()
    cached = kuzu_factory("alice")
    assert "engram_fts" not in cached.reader.index_names()
    assert cached.ensure_indexes(8, 50) == []
    assert [i for i, _ in cached.reader.text_search("topic3 memory", 60)][:1] != []
    assert cached.delete_engrams(["e00003", "nope"]) == 1
    cached.close()
    uncached = kuzu_factory("alice", native_indexes=True)
    assert uncached.ensure_indexes(8, 50) == ["engram_fts"]
    hits = [i for i, _ in uncached.reader.text_search("topic3 memory", 60)]
    assert hits and "e00003" not in hits


def test_from_settings_uses_user_dir(tmp_path: Path) -> None:
    settings = Settings.from_env({}, storage_location=str(tmp_path), accessing_user="bob")
    backend = KuzuBackend.from_settings(settings, "bob")
    assert backend.path == tmp_path / "bob" / DB_FILE
    with backend:
        assert backend.path.exists()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SMRITI_KUZU_BUFFER_MB": "lots"}, "SMRITI_KUZU_BUFFER_MB='lots' is not an integer"),
        ({"SMRITI_KUZU_BUFFER_MB": "16"}, "must be 0 .* or at least 64"),
        ({"SMRITI_KUZU_BUFFER_MB": "-5"}, "must be at least 0"),
    ],
)
def test_memory_settings_are_validated(tmp_path: Path, env: dict, message: str) -> None:
    settings = Settings.from_env({"STORAGE_LOCATION": str(tmp_path), **env})
    # A declared setting (smriti_embedded_graph.settings): a bad value is a ConfigError.
    with pytest.raises(ConfigError, match=message):
        KuzuBackend.from_settings(settings, "alice")


def test_buffer_pool_setting_opens_a_working_store(tmp_path: Path) -> None:
    env = {"STORAGE_LOCATION": str(tmp_path), "SMRITI_KUZU_BUFFER_MB": "64"}
    backend = KuzuBackend.from_settings(Settings.from_env(env), "alice")
    assert backend.buffer_mb == 64
    assert KuzuBackend.from_settings(Settings.from_env({}), "bob").buffer_mb == 0
    backend.open()
    try:
        backend.import_records([build.engram(i) for i in range(300)], [], [], [], [])
        assert backend.count_engrams() == 300
    finally:
        backend.close()


def test_plugin_registers_kuzu_only() -> None:
    """``ladybug`` is LadybugDB's own plugin now, not an alias of Kùzu."""
    from smriti_backend_kuzu import plugin

    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(plugin, name="smriti-backend-kuzu")
    registry = Registry(pm)
    assert registry.get("backend", "kuzu", "DB_TYPE") is KuzuBackend
    assert KuzuBackend.aliases == ()


def test_plugin_module_does_not_import_the_driver() -> None:
    code = (
        "import sys, smriti_backend_kuzu.plugin as p; p.register_storage_backends(); "
        "sys.exit(1 if 'kuzu' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_import_keeps_every_edge_across_large_calls(kuzu_factory: Factory) -> None:
    """Edges of large import calls are all kept, and later calls update earlier edges.

    UNWIND ... MERGE once dropped 2 of 17,562 CoOccurs edges of an import call into a
    store that already held edges; that case reproduced only with a 3,000-memory backup
    round trip (bench/backup.py checks the hash), not with this synthetic graph.
    """
    backend = kuzu_factory("alice")
    cues = [build.cue(f"cue{i}") for i in range(400)]
    backend.import_records([], cues, [], [], [])
    pairs = [(a, b) for a in range(400) for b in range(400) if a != b and (a * 7 + b) % 5 == 0]
    want = 0
    for part in range(3):
        chunk = pairs[part::3]
        edges = [CoOccurrence(cues[a].id, cues[b].id, float(part + 1)) for a, b in chunk]
        # the second and third calls also update edges written by the first
        if part:
            edges += [CoOccurrence(cues[a].id, cues[b].id, 9.0) for a, b in pairs[0::3][:500]]
        backend.import_records([], [], [], [], edges)
        want += len(chunk)
        assert backend.counts()["cooccurrences"] == want
    strengths = {(c.source_id, c.target_id): c.strength for c in backend.iter_cooccurrences()}
    a, b = pairs[0]
    assert strengths[(cues[a].id, cues[b].id)] == 9.0
    assert len(strengths) == len(pairs)


def test_large_update_batches_are_staged_and_exact(kuzu_factory: Factory) -> None:
    """Consolidation-sized updates (COPY + join path) change exactly the given engrams."""
    from smriti_embedded_graph.writes import STAGED_UPDATE

    backend = kuzu_factory("alice")
    n = STAGED_UPDATE + 200
    backend.import_records([build.engram(i) for i in range(n)], [], [], [], [])
    updates = [
        EngramUpdate(build.engram(i).id, cluster_id=i % 7, decay_factor=0.25) for i in range(n - 50)
    ]
    updates.append(EngramUpdate("no-such-engram", cluster_id=3, decay_factor=0.5))
    updates.append(EngramUpdate(build.engram(0).id, cluster_id=6, decay_factor=0.75))  # last wins
    backend.update_engrams(updates)

    def check(store: KuzuBackend) -> None:
        got = {e.id: e for e in store.iter_engrams()}
        assert len(got) == n
        assert got[build.engram(0).id].cluster_id == 6
        assert got[build.engram(0).id].decay_factor == 0.75
        assert (
            got[build.engram(8).id].cluster_id == 1 and got[build.engram(8).id].decay_factor == 0.25
        )
        untouched = got[build.engram(n - 1).id]
        assert untouched.cluster_id == build.engram(n - 1).cluster_id
        assert untouched.decay_factor == build.engram(n - 1).decay_factor

    check(backend)  # the mirror
    backend.close()
    check(kuzu_factory("alice"))  # the store itself


def test_many_tag_and_supersession_updates_reach_the_text_index(kuzu_factory: Factory) -> None:
    """More updates than one statement by primary key takes (the UNWIND path), with
    Kùzu's full-text index built: it follows the new tags."""
    from smriti_embedded_graph.writes import SMALL_UPDATE

    backend = kuzu_factory("alice", native_indexes=True)
    n = SMALL_UPDATE + 8
    engrams = [build.engram(i, content=f"note {i}", tags=["ocelot"]) for i in range(n)]
    backend.import_records(engrams, [], [], [], [])
    assert "engram_fts" in backend.ensure_indexes(8, 10)
    when = datetime(2025, 6, 1, 12, 0, 0, 250000, tzinfo=UTC)
    backend.update_engrams(
        [EngramUpdate(e.id, tags=["margay", f"n{i}"]) for i, e in enumerate(engrams)]
        + [EngramUpdate(e.id, superseded_by="e09999", superseded_at=when) for e in engrams[::2]]
        + [EngramUpdate("no-such-engram", tags=["margay"])]
    )
    assert backend.reader.text_search("ocelot", n) == []
    assert {i for i, _ in backend.reader.text_search("margay", n)} == {e.id for e in engrams}
    got = {e.id: e for e in backend.get_engrams([e.id for e in engrams])}
    assert got[engrams[3].id].tags == ["margay", "n3"]
    assert (got[engrams[2].id].superseded_by, got[engrams[2].id].superseded_at) == ("e09999", when)
    assert (got[engrams[3].id].superseded_by, got[engrams[3].id].superseded_at) == ("", None)
    current = backend.list_page(Listing(n, tags=["margay"], include_superseded=False))
    assert sorted(e.id for e in current) == sorted(e.id for e in engrams[1::2])


@pytest.mark.parametrize("failing", ["commit", "caches"])
def test_failed_import_commit_leaves_store_and_caches_as_they_were(
    kuzu_factory: Factory, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """The cues and engram ids kept in memory follow the commit; if either fails, what
    the backend answers is what the store holds.

    The failing call carries no edges: Kùzu 0.11.3 loses the table's earlier edges when
    a transaction that COPYs into a rel table is rolled back (README, "Known defects").
    """
    backend = kuzu_factory("alice")
    first = [build.engram(i) for i in range(3)]
    shared = build.cue("shared")
    backend.import_records(first, [shared], [Link(e.id, shared.id, 1.0) for e in first], [], [])
    later = [build.engram(i) for i in range(3, 6)]
    fresh = build.cue("fresh")

    def broken_commit(conn: object) -> None:
        conn.execute("ROLLBACK")  # type: ignore[attr-defined]
        raise BackendError("Kùzu commit failed: disk full")

    def broken_cache(*args: object) -> None:
        raise RuntimeError("out of memory")

    if failing == "commit":
        monkeypatch.setattr(backend.store, "commit", broken_commit)
    else:
        monkeypatch.setattr(backend.writer, "_after_import", broken_cache)
    with pytest.raises((BackendError, RuntimeError)):
        backend.import_records(later, [fresh], [], [], [])
    monkeypatch.undo()
    stored = failing == "caches"  # the commit went through; cues and ids were reloaded
    want = sorted(e.id for e in (first + later if stored else first))
    assert sorted(e.id for e in backend.iter_engrams()) == want
    assert sorted(e.id for e in backend.get_engrams([e.id for e in first + later])) == want
    hits = {key for key, _ in backend.reader.vector_search(later[0].embedding, 10)}
    assert (later[0].id in hits) == stored
    assert bool(backend.get_cues(["fresh"])) == stored
    assert ("e00004" in {k for k, _ in backend.reader.text_search("memory number 4", 10)}) == stored
    members = backend.reader.engrams_for_cues([shared.id], 10)[shared.id]
    assert sorted(k for k, _ in members) == sorted(e.id for e in first)
    backend.import_records(later, [fresh], [Link(e.id, fresh.id, 1.0) for e in later], [], [])
    assert backend.count_engrams() == 6
    assert len(backend.reader.engrams_for_cues([fresh.id], 10)[fresh.id]) == 3


def test_imported_undated_association_has_one_time_in_working_set_and_store(
    indexed_factory: Callable[[str], IndexedBackend], kuzu_factory: Factory
) -> None:
    backend = indexed_factory("alice")
    backend.import_records([build.engram(1), build.engram(2)], [], [], [], [])
    backend.import_records([], [], [], [Association("e00001", "e00002", 0.8)], [])
    [cached] = backend.neighbourhood(Expand(["e00001"], 5, 0, 0)).associations
    assert cached.created_at is not None
    backend.close()
    [stored] = kuzu_factory("alice").reader.associations_of(["e00001"], 5)
    assert stored == cached


def _answers(backend: KuzuBackend | IndexedBackend) -> tuple[object, ...]:
    seeds = backend.seek(
        Seek(k=5, vector=build.vec(10_007), text="number 7", cue_names=["hub"], cue_fanout=4)
    )
    around = backend.neighbourhood(Expand(["e00003", "e00004"], 2, 100, 4))
    return (
        [i for i, _ in seeds.vector],
        [i for i, _ in seeds.text],
        [(m.cue_id, m.degree, [e for e, _ in m.engrams]) for m in seeds.cues],
        seeds.total,
        sorted((a.source_id, a.target_id) for a in around.associations),
        sorted((lk.engram_id, lk.cue_id) for lk in around.links),
        around.degrees,
        {c: [e for e, _ in m] for c, m in around.members.items()},
        [e.id for e in backend.list_page(Listing(5))],
        sorted((s.id, s.importance) for s in backend.engram_stats()),
    )


def test_working_set_loads_what_the_native_reads_answer(
    kuzu_factory: Factory, indexed_factory: Callable[[str], IndexedBackend]
) -> None:
    """``working_set_streams`` (unordered chunks of node offsets) carries every cue,
    engram, link and association: the loaded working set answers as Kùzu does."""
    plain = kuzu_factory("alice")
    hub, side = build.cue("hub"), build.cue("side")
    for i in range(30):
        assoc = [Association(f"e{i:05d}", f"e{i - 1:05d}", 0.5 + i / 120)] if i else []
        engram = build.engram(i, content=f"memory number {i} words", importance=(i % 7) / 7)
        plain.add_memory(engram, [hub, side] if i % 3 else [hub], assoc)
    want = _answers(plain)
    plain.close()
    indexed = indexed_factory("alice")
    assert len(list(indexed.inner.working_set_streams()[1])) == 30
    assert _answers(indexed) == want


def test_from_settings_builds_native_indexes_only_without_a_working_set(tmp_path: Path) -> None:
    base = {"STORAGE_LOCATION": str(tmp_path)}
    cases = [
        ({}, False),
        ({"SMRITI_WORKING_SET": "off"}, True),
        ({"SMRITI_WORKING_SET_MB": "0"}, True),
    ]
    for env, native in cases:
        backend = KuzuBackend.from_settings(Settings.from_env({**base, **env}), "alice")
        assert backend.native_indexes is native, env
    pm, _ = create_plugin_manager(load_entry_points=False)
    from smriti_backend_kuzu import plugin

    pm.register(plugin, name="smriti-backend-kuzu")
    chosen = choose_backend(Registry(pm), Settings.from_env(base), "alice")
    assert isinstance(chosen, IndexedBackend) and isinstance(chosen.inner, KuzuBackend)


def test_the_old_cache_setting_is_ignored_with_a_warning(tmp_path: Path) -> None:
    env = {"STORAGE_LOCATION": str(tmp_path), "SMRITI_KUZU_CACHE_MB": "-1"}
    with capture_logs() as logs:
        backend = KuzuBackend.from_settings(Settings.from_env(env), "alice")
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert "SMRITI_KUZU_CACHE_MB" in warning["event"]
    assert "SMRITI_WORKING_SET_MB" in warning["event"]
    assert backend.native_indexes is False


def test_one_process_holds_many_stores_open(kuzu_factory: Factory) -> None:
    """A team server with SMRITI_OWNER=off opens a store per user; Kùzu's default
    reservation of 8 TB of address space per store ran out after about 15."""
    stores = [kuzu_factory(f"user{i:02d}") for i in range(24)]
    for i, backend in enumerate(stores):
        backend.add_memory(build.engram(i), [], [])
    assert [b.count_engrams() for b in stores] == [1] * 24


def test_the_native_text_scan_uses_the_core_analyzer(kuzu_factory: Factory) -> None:
    """Without a working set, text search drops stopwords and folds plurals as the
    working set and the reference backend do: a memory that only shares 'the' with the
    query is no hit, and 'strawberries' is found by 'strawberry' and the other way."""
    backend = kuzu_factory("alice")
    build = GraphBuilder(8)
    texts = ["the user loves strawberries", "a strawberry field in June", "the the the end"]
    for i, text in enumerate(texts):
        backend.add_memory(build.engram(i, content=text), [], [])
    found = [i for i, _ in backend.reader.text_search("Where is the strawberry?", 5)]
    assert sorted(found) == ["e00000", "e00001"]
    assert [i for i, _ in backend.reader.text_search("strawberries", 5)][0] in ("e00000", "e00001")
    assert backend.reader.text_search("the and of", 5) == []
