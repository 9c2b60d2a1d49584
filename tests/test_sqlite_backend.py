"""The built-in SQLite backend: the conformance suite, and what is its own (files,
reopening, refusing files that are not its stores, several connections at once)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from smriti.backend import Expand, Listing, Seek
from smriti.config import Settings
from smriti.default_plugins.sqlite import schema
from smriti.default_plugins.sqlite.backend import DB_FILE, SqliteBackend
from smriti.default_plugins.sqlite.codec import ENGRAM_COLUMNS, engram_row
from smriti.default_plugins.sqlite.lexical import document_terms, write_postings
from smriti.errors import BackendError, ConfigError
from smriti.model import Association, EngramUpdate
from smriti.plugins import Registry, create_plugin_manager
from smriti.testing import GraphBuilder, RecallEqualityTests, StorageBackendTests
from smriti.testing.builders import T0
from smriti.testing.storage_suite import assert_engram_equal

Make = Callable[[str], SqliteBackend]


@pytest.fixture
def sqlite_factory(tmp_path: Path) -> Iterator[Make]:
    """``make(user)``: an opened store under tmp_path/store, closed afterwards."""
    made: list[SqliteBackend] = []

    def make(user: str) -> SqliteBackend:
        backend = SqliteBackend(user, tmp_path / "store" / user / DB_FILE)
        backend.open()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


class TestSqliteConformance(StorageBackendTests):
    """Every clause of the storage contract against real SQLite files."""

    @pytest.fixture
    def backend_factory(self, sqlite_factory: Make) -> Make:
        return sqlite_factory


@pytest.fixture
def build() -> GraphBuilder:
    return GraphBuilder(8)


def test_registered_as_a_builtin_and_selected_by_db_type(tmp_path: Path) -> None:
    pm, report = create_plugin_manager(load_entry_points=False)
    registry = Registry(pm)
    assert registry.get("backend", "sqlite", "DB_TYPE") is SqliteBackend
    assert registry.owners[("backend", "sqlite")] == "smriti.default_plugins.sqlite"
    assert "smriti.default_plugins.sqlite" in [p.name for p in report.loaded]
    settings = Settings.from_env({"STORAGE_LOCATION": str(tmp_path), "DB_TYPE": "sqlite"})
    backend = SqliteBackend.from_settings(settings, "alice")
    assert backend.path == tmp_path / "alice" / "smriti.sqlite3"


@pytest.mark.parametrize("user", ["../etc", "a/b", "", ".hidden", "x" * 65])
def test_user_names_are_validated_before_they_become_paths(tmp_path: Path, user: str) -> None:
    settings = Settings.from_env({"STORAGE_LOCATION": str(tmp_path)})
    with pytest.raises(ConfigError):
        SqliteBackend.from_settings(settings, user)
    with pytest.raises(ConfigError):
        SqliteBackend(user, tmp_path / "x.sqlite3")


def test_data_survives_reopen_by_a_new_instance(tmp_path: Path, build: GraphBuilder) -> None:
    path = tmp_path / "alice" / DB_FILE
    first = SqliteBackend("alice", path)
    first.open()
    apple = build.cue("apple")
    first.add_memory(build.engram(1), [apple], [])
    first.add_memory(build.engram(2), [apple], [Association("e00002", "e00001", 0.9)])
    first.update_engrams([EngramUpdate("e00001", access_count=42)])
    first.set_meta("leiden.resolution", "0.75")
    before = first.counts()
    first.close()
    again = SqliteBackend("alice", path)
    again.open()
    try:
        assert again.counts() == before
        assert again.get_engrams(["e00001"])[0].access_count == 42
        assert again.get_meta("leiden.resolution") == "0.75"
        hits = again.seek(Seek(k=1, vector=build.vec(10_002), text="topic2"))
        assert hits.vector[0][0] == "e00002" and hits.text[0][0] == "e00002"
        around = again.neighbourhood(Expand(["e00001"], 5, 10, 10))
        assert [(a.source_id, a.target_id) for a in around.associations] == [("e00002", "e00001")]
        assert around.degrees == {apple.id: 2}
    finally:
        again.close()


def test_each_user_has_a_separate_file(sqlite_factory: Make, build: GraphBuilder) -> None:
    alice, bob = sqlite_factory("alice"), sqlite_factory("bob")
    alice.add_memory(build.engram(1, content="alice zebra"), [build.cue("apple")], [])
    assert alice.path != bob.path and alice.path.parent.name == "alice"
    assert bob.path.parent.name == "bob"
    with sqlite3.connect(bob.path) as conn:
        assert conn.execute("SELECT count(*) FROM engram").fetchone() == (0,)
    with sqlite3.connect(alice.path) as conn:
        assert conn.execute("SELECT id FROM engram").fetchall() == [("e00001",)]
    assert bob.seek(Seek(k=5, vector=build.vec(10_001), text="zebra", cue_names=["apple"])) == (
        bob.seek(Seek(k=5))
    )


def _refused(path: Path, match: str) -> None:
    before = path.read_bytes()
    backend = SqliteBackend("alice", path)
    with pytest.raises(BackendError, match=match):
        backend.open()
    backend.close()
    assert path.read_bytes() == before, "a refused file must be left untouched"


def test_a_file_that_is_not_a_database_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    path.parent.mkdir()
    path.write_bytes(b"this is not a database, but someone's notes\n" * 200)
    _refused(path, "is not a Smriti SQLite store.*left untouched")


def test_a_damaged_store_is_refused_and_kept(tmp_path: Path, build: GraphBuilder) -> None:
    path = tmp_path / "alice" / DB_FILE
    with SqliteBackend("alice", path) as backend:
        backend.add_memory(build.engram(1), [], [])
    data = bytearray(path.read_bytes())
    data[:16] = b"garbage garbage!"  # the SQLite header's magic string
    path.write_bytes(bytes(data))
    _refused(path, "is not a Smriti SQLite store")


def test_another_programs_database_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.close()
    _refused(path, "another program")


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    SqliteBackend("alice", path).open()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    _refused(path, "newer than this Smriti")


def _version_1_store(path: Path, build: GraphBuilder) -> None:
    """A store as the previous Smriti wrote it: schema 1, no version columns."""
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    schema.MIGRATIONS[1](conn)
    old_columns = ENGRAM_COLUMNS.split(", supersedes")[0]
    for i in (1, 2):
        row = engram_row(build.engram(i, tags=["kept"]))
        values = [row[c] for c in old_columns.split(", ")]
        seq = conn.execute(
            f"INSERT INTO engram ({old_columns}) VALUES ({', '.join('?' * len(values))})", values
        ).lastrowid
        write_postings(conn, int(seq or 0), document_terms("", "", ["kept"]))
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 1")
    conn.close()


def test_a_version_1_store_is_migrated_in_place_and_keeps_its_memories(
    tmp_path: Path, build: GraphBuilder
) -> None:
    path = tmp_path / "alice" / DB_FILE
    _version_1_store(path, build)
    with SqliteBackend("alice", path) as backend:
        got = {e.id: e for e in backend.get_engrams(["e00001", "e00002"])}
        for i in (1, 2):
            want = build.engram(i, tags=["kept"])
            assert_engram_equal(got[want.id], want)  # versions read as "" and None
        assert [e.id for e in backend.list_page(Listing(5, include_superseded=False))] == [
            "e00002",
            "e00001",
        ]
        when = T0 + timedelta(days=1)
        backend.update_engrams([EngramUpdate("e00001", superseded_by="e00002", superseded_at=when)])
        assert [e.id for e in backend.list_page(Listing(5, include_superseded=False))] == ["e00002"]
        assert [i for i, _ in backend.seek(Seek(k=5, text="kept")).text] == ["e00001", "e00002"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
        schema.MIGRATIONS[2](conn)  # a second run changes nothing and does not fail
    conn.close()
    with SqliteBackend("alice", path) as again:  # opened again: nothing to migrate
        old = again.get_engrams(["e00001"])[0]
        assert (old.superseded_by, old.superseded_at) == ("e00002", when)
        assert again.count_engrams() == 2


def test_a_version_2_store_gains_origins_read_as_unknown(
    tmp_path: Path, build: GraphBuilder
) -> None:
    path = tmp_path / "alice" / DB_FILE
    path.parent.mkdir(parents=True)
    conn = sqlite3.connect(path, isolation_level=None)
    schema.MIGRATIONS[1](conn)
    schema.MIGRATIONS[2](conn)
    v2_columns = ENGRAM_COLUMNS.split(", origin")[0]
    row = engram_row(build.engram(1, supersedes="e00000"))
    values = [row[c] for c in v2_columns.split(", ")]
    conn.execute(
        f"INSERT INTO engram ({v2_columns}) VALUES ({', '.join('?' * len(values))})", values
    )
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID:d}")
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    with SqliteBackend("alice", path) as backend:
        [old] = backend.get_engrams(["e00001"])
        assert_engram_equal(old, build.engram(1, supersedes="e00000"))
        assert (old.origin, old.principal) == ("", "")  # unknown, not guessed
        new = build.engram(2, origin="agent", principal="key:k1")
        backend.add_memory(new, [], [])
        assert_engram_equal(backend.get_engrams(["e00002"])[0], new)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
        schema.MIGRATIONS[3](conn)  # idempotent
    conn.close()


def test_a_directory_in_place_of_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    path.mkdir(parents=True)
    with pytest.raises(BackendError, match="is a directory"):
        SqliteBackend("alice", path).open()


def test_two_instances_on_one_store_see_each_others_writes(
    tmp_path: Path, build: GraphBuilder
) -> None:
    # Two processes share a store the same way: each has its own connections and
    # vector tables, which must notice appends and deletions made by the other.
    path = tmp_path / "alice" / DB_FILE
    with SqliteBackend("alice", path) as one, SqliteBackend("alice", path) as two:
        one.add_memory(build.engram(1), [build.cue("a")], [])
        assert two.seek(Seek(k=3, vector=build.vec(10_001))).vector[0][0] == "e00001"
        two.add_memory(build.engram(2), [build.cue("a")], [])
        assert one.seek(Seek(k=3, vector=build.vec(10_002))).vector[0][0] == "e00002"
        one.delete_engrams(["e00002"])
        assert [i for i, _ in two.seek(Seek(k=3, vector=build.vec(10_002))).vector] == ["e00001"]
        one.delete_engrams(["e00001"])
        assert two.delete_orphan_cues() == 1
        assert one.seek(Seek(k=3, cue_vectors=np.asarray([build.vec(1)]))).cues == []


def test_concurrent_threads_store_and_seek(sqlite_factory: Make, build: GraphBuilder) -> None:
    backend = sqlite_factory("alice")
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(offset, offset + 20):
                backend.add_memory(build.engram(i), [build.cue(f"w{i % 5}")], [])
                backend.seek(Seek(k=5, vector=build.vec(i), text=f"number {i}"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n * 100,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert backend.count_engrams() == 80 and backend.counts()["cues"] == 5


def test_store_file_settings(sqlite_factory: Make) -> None:
    backend = sqlite_factory("alice")
    conn = backend.db.connection()
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)


class TestSqliteRecallEquality(RecallEqualityTests):
    """The suite's own baseline: the reference backend against itself."""

    @pytest.fixture
    def backend_factory(self, sqlite_factory: Make) -> Make:
        return sqlite_factory


_WRITER = """
import sys
from smriti.default_plugins.sqlite.backend import SqliteBackend
from smriti.testing import GraphBuilder

build = GraphBuilder(8)
backend = SqliteBackend("alice", sys.argv[1])
backend.open()
for i in range(100_000):
    backend.add_memory(build.engram(i), [build.cue(f"w{i % 7}")], [])
    print(build.engram(i).id, flush=True)  # acknowledged: add_memory returned
"""


def test_every_acknowledged_memory_survives_a_kill(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    acknowledged: list[str] = []
    assert writer.stdout is not None
    deadline = time.monotonic() + 60
    while len(acknowledged) < 40 and time.monotonic() < deadline:
        acknowledged.append(writer.stdout.readline().strip())
    os.kill(writer.pid, signal.SIGKILL)  # mid-write, most likely
    writer.wait()
    assert len(acknowledged) == 40
    with SqliteBackend("alice", path) as backend:
        stored = {e.id for e in backend.iter_engrams()}
        assert set(acknowledged) <= stored
        assert backend.counts()["links"] == len(stored), "no memory is left half-written"


def test_a_repeated_store_is_a_retry_and_other_content_an_error(
    sqlite_factory: Make, build: GraphBuilder
) -> None:
    backend = sqlite_factory("alice")
    engram, apple = build.engram(1), build.cue("apple")
    backend.add_memory(engram, [apple, build.cue("pear")], [])
    again = backend.add_memory(engram.with_changes(importance=0.01), [build.cue("plum")], [])
    assert again.engram.importance == engram.importance, "a retry changes nothing"
    assert sorted(c.id for c in again.cues) == [apple.id, "c-pear"]
    assert backend.counts()["cues"] == 2 and backend.count_engrams() == 1
    with pytest.raises(BackendError, match="already stored with other content"):
        backend.add_memory(engram.with_changes(content="something else"), [], [])


def test_members_of_equal_importance_are_ordered_by_id(
    sqlite_factory: Make, build: GraphBuilder
) -> None:
    backend = sqlite_factory("alice")
    hub = build.cue("hub")
    for i in (5, 3, 9, 1):
        backend.add_memory(build.engram(i, importance=0.5), [hub], [])
    [match] = backend.seek(Seek(k=1, cue_names=["hub"], cue_fanout=3)).cues
    assert [e for e, _ in match.engrams] == ["e00001", "e00003", "e00005"]
    around = backend.neighbourhood(Expand(["e00009"], 0, 10, 2))
    assert [e for e, _ in around.members[hub.id]] == ["e00001", "e00003"]
