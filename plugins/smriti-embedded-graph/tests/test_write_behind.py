"""New memories reach the database (Kùzu or LadybugDB) after the store returns, through a
durable journal."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from smriti_embedded_graph.testing import engine_under_test

from smriti.backend import Association, BackendError
from smriti.testing import GraphBuilder

Backend = engine_under_test()
DB_FILE = Backend.db_file
Factory = Callable[..., Backend]
build = GraphBuilder(8)
#: Tests of the engine's own full-text and vector indexes (Kùzu's bundled extensions).
needs_extensions = pytest.mark.skipif(
    not Backend.native_extensions, reason="the engine has no fts/vector extension"
)


def _hold_writes(backend: Backend) -> threading.Event:
    """Keep the background write from running until the returned event is set."""
    gate = threading.Event()
    background = backend.journal._write_in_background
    backend.journal._write_in_background = lambda: (gate.wait(60), background())  # type: ignore[method-assign]
    return gate


def _run_killed(path: Path, body: str) -> None:
    """Open alice's store at ``path`` in a new process as ``backend`` (``build`` an
    8-dimension GraphBuilder), run ``body`` and leave with ``os._exit``, no close, as if
    killed; the process must succeed."""
    script = f"""
import os
from smriti.backend import Association
from smriti.testing import GraphBuilder
from smriti_embedded_graph.testing import engine_under_test

Backend = engine_under_test()
build = GraphBuilder(8)
backend = Backend("alice", {str(path)!r})  # kept: no close when collected
backend.open()
{textwrap.dedent(body)}
os._exit(0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()


@contextmanager
def _opened(path: Path, **kwargs: Any) -> Iterator[Backend]:
    backend = Backend("alice", path, **kwargs)
    backend.open()
    try:
        yield backend
    finally:
        backend.close()


def _kuzu_ids(backend: Backend) -> list[str]:
    return sorted(r[0] for r in backend.journal.query("MATCH (e:Engram) RETURN e.id"))


def test_store_returns_before_kuzu_has_it_and_reads_see_it(store_factory: Factory) -> None:
    backend = store_factory("alice")
    gate = _hold_writes(backend)
    backend.add_memory(build.engram(1), [build.cue("x"), build.cue("y")], [])
    assert backend.journal.writes_queued() == 1
    assert backend.journal.journal_path.stat().st_size > 0
    # A query of Kùzu writes the queued memory first.
    assert [e.id for e in backend.get_engrams(["e00001"])] == ["e00001"]
    assert _kuzu_ids(backend) == ["e00001"]
    assert backend.journal.writes_queued() == 0
    links = backend.journal.query(
        "MATCH (:Engram {id: 'e00001'})-[:EncodedBy]->(c:Cue) RETURN c.name"
    )
    assert sorted(r[0] for r in links) == ["x", "y"]
    gate.set()
    # The journal keeps the memory until Kùzu has checkpointed it into its file.
    assert backend.journal.journal_path.stat().st_size > 0
    assert backend.journal.checkpoint(force=True)
    assert backend.journal.journal_path.stat().st_size == 0


def test_other_writes_come_after_the_queued_memories(store_factory: Factory) -> None:
    backend = store_factory("alice")
    gate = _hold_writes(backend)
    backend.add_memory(build.engram(1), [], [])
    backend.add_memory(build.engram(2), [], [Association("e00002", "e00001", 0.9)])
    assert backend.delete_engrams(["e00001"]) == 1  # written, then deleted
    assert _kuzu_ids(backend) == ["e00002"]
    assert backend.journal.query("MATCH ()-[r:AssociatedWith]->() RETURN count(r)") == [[0]]
    gate.set()


def test_kill_before_the_background_write_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    _run_killed(
        path,
        """
        backend.add_memory(build.engram(1), [build.cue("x")], [])
        backend.count_engrams()  # e00001 is in Kùzu
        backend.journal.query("RETURN 1")
        backend.journal._write_in_background = lambda: None  # the background write never runs
        backend.add_memory(
            build.engram(2), [build.cue("x"), build.cue("y")],
            [Association("e00002", "e00001", 0.8)],
        )
        assert backend.journal.writes_queued() == 1
        """,
    )
    assert path.with_name(DB_FILE + ".journal").stat().st_size > 0

    with _opened(path) as backend:
        assert _kuzu_ids(backend) == ["e00001", "e00002"]
        [got] = backend.get_engrams(["e00002"])
        assert got.content == build.engram(2).content
        assert sorted(link.cue_id for link in backend.reader.cues_of(["e00002"])) == ["c-x", "c-y"]
        [edge] = [a for a in backend.iter_associations() if a.source_id == "e00002"]
        assert (edge.target_id, edge.strength) == ("e00001", 0.8)
        assert backend.counts()["cooccurrences"] == 2  # x<->y, from the replayed memory
        assert backend.journal.journal_path.stat().st_size == 0
    with _opened(path) as again:  # opening again writes nothing twice
        assert _kuzu_ids(again) == ["e00001", "e00002"]


def test_a_memory_forgotten_before_a_kill_stays_forgotten(tmp_path: Path) -> None:
    """A memory written to Kùzu and then forgotten is still in the journal until a
    checkpoint trims it; after a kill the replay must neither bring it back nor fail on
    the cue it created (which outlives it until consolidation)."""
    path = tmp_path / "alice" / DB_FILE
    _run_killed(
        path,
        """
        backend.add_memory(build.engram(1), [build.cue("zebra")], [])
        backend.add_memory(build.engram(2), [build.cue("lion")], [])
        backend.journal.write_queued()
        assert backend.delete_engrams(["e00001"]) == 1
        backend.add_memory(build.engram(3), [build.cue("lion")], [])  # no checkpoint follows
        """,
    )
    with _opened(path) as backend:
        assert _kuzu_ids(backend) == ["e00002", "e00003"]
        assert backend.delete_orphan_cues() == 1  # zebra, created by the forgotten one
    with _opened(path) as again:
        assert _kuzu_ids(again) == ["e00002", "e00003"]


@needs_extensions
def test_replayed_memories_join_an_existing_vector_index(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    with _opened(path, native_indexes=True) as off:  # no working set: HNSW index built
        off.add_memory(build.engram(1), [], [])
        assert off.ensure_indexes(8, 0)
    _run_killed(
        path,
        """
        backend.journal._write_in_background = lambda: None
        backend.add_memory(build.engram(2), [], [])
        """,
    )
    with _opened(path, native_indexes=True) as again:
        indexed = sorted(r[0] for r in again.journal.query("MATCH (v:EngramVec) RETURN v.id"))
        assert indexed == ["e00001", "e00002"]


@needs_extensions
def test_store_killed_after_dropping_the_text_index_stays_writable(tmp_path: Path) -> None:
    # Kùzu 0.11.3: a DROP_FTS_INDEX left in the WAL by a killed process made every later
    # engram write fail ("Cannot find table catalog entry"); the drop is checkpointed.
    path = tmp_path / "alice" / DB_FILE
    with _opened(path, native_indexes=True) as off:
        off.add_memory(build.engram(1), [], [])
        assert off.ensure_indexes(8, 0)
    _run_killed(path, "")  # the open, for a working set, drops the text index
    with _opened(path, native_indexes=True) as again:
        again.add_memory(build.engram(2), [], [])
        assert _kuzu_ids(again) == ["e00001", "e00002"]


def test_unfinished_last_journal_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    backend = Backend("alice", path)
    backend.open()
    gate = _hold_writes(backend)
    backend.add_memory(build.engram(1), [], [])
    backend.add_memory(build.engram(2), [], [])
    journal = backend.journal.journal_path.read_bytes()
    backend.journal._queued.clear()  # close must not write them: the journal is all there is
    gate.set()
    backend.close()
    first, second = journal.splitlines(keepends=True)
    backend.journal.journal_path.write_bytes(first + second[: len(second) // 2])  # cut mid-append
    # A line cut mid-append is a store that never returned: unlike here, the manifest
    # never counted it (it counts e00002, and the open would rightly refuse).
    (path.parent / (DB_FILE + ".manifest.json")).unlink()

    with _opened(path) as backend:
        assert _kuzu_ids(backend) == ["e00001"]


def test_damaged_journal_line_stops_the_open_and_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    backend = Backend("alice", path)
    backend.open()
    backend.close()
    damaged = b'{"row": not json}\n' + b'{"row": {}}\n'
    path.with_name(DB_FILE + ".journal").write_bytes(damaged)
    with pytest.raises(BackendError, match="line 1 of the journal"):
        Backend("alice", path).open()
    assert path.with_name(DB_FILE + ".journal").read_bytes() == damaged


def test_unwritable_journal_stores_nothing(store_factory: Factory) -> None:
    backend = store_factory("alice")
    backend.journal.journal_path.mkdir()  # cannot be opened as a file
    with pytest.raises(BackendError, match="journal"):
        backend.add_memory(build.engram(1), [build.cue("x")], [])
    assert backend.get_engrams(["e00001"]) == []
    assert backend.count_engrams() == 0
    assert backend.counts()["cues"] == 0


def test_taken_ids_are_refused_before_they_are_queued(store_factory: Factory) -> None:
    backend = store_factory("alice")
    backend.add_memory(build.engram(1), [build.cue("x")], [])
    with pytest.raises(BackendError, match="already stored"):
        backend.add_memory(build.engram(1, content="same id"), [], [])
    renamed = build.cue("x").__class__("c-x", "another name", "keyword", build.vec(3))
    with pytest.raises(BackendError, match="already stored"):
        backend.add_memory(build.engram(2), [renamed], [])
    twins = [build.cue("p"), build.cue("q").__class__("c-p", "q", "keyword", build.vec(4))]
    with pytest.raises(BackendError, match="already stored"):
        backend.add_memory(build.engram(3), twins, [])
    assert backend.journal.writes_queued() == 0
    assert _kuzu_ids(backend) == ["e00001"]


def test_close_writes_what_is_queued(store_factory: Factory, tmp_path: Path) -> None:
    backend = store_factory("alice")
    _hold_writes(backend).set()  # runs, but only after close has written the queue
    for i in range(5):
        backend.add_memory(build.engram(i), [build.cue(f"k{i}")], [])
    backend.close()
    assert backend.journal.journal_path.stat().st_size == 0
    again = store_factory("alice")
    assert _kuzu_ids(again) == [f"e0000{i}" for i in range(5)]


def test_a_mass_deletion_is_checkpointed_at_its_end(store_factory: Factory) -> None:
    """Pruning thousands of memories leaves no WAL for the next large write to checkpoint
    with it; deleting a few leaves the WAL to the usual size threshold."""
    from smriti_embedded_graph.writes import MASS_DELETE

    backend = store_factory("alice")
    engrams = [build.engram(i) for i in range(MASS_DELETE + 10)]
    backend.import_records(engrams, [], [], [], [])
    backend.journal.checkpoint(force=True)
    wal = backend.journal._store.path.with_name(DB_FILE + ".wal")

    def wal_bytes() -> int:
        return wal.stat().st_size if wal.exists() else 0

    assert backend.delete_engrams([e.id for e in engrams[:5]]) == 5
    assert wal_bytes() > 0
    assert backend.delete_engrams([e.id for e in engrams[5 : 5 + MASS_DELETE]]) == MASS_DELETE
    assert wal_bytes() == 0
    assert backend.count_engrams() == 5
