"""The working set (smriti.index) behind the storage contract: the conformance suite
through ``IndexedBackend`` over the built-in SQLite backend, and what is its own
(background loading, writes during a load, deferred strengthening, the budget)."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from smriti.backend import Expand, Listing, Seek, StorageBackend, list_key, listing_sorted
from smriti.default_plugins.sqlite.backend import DB_FILE, SqliteBackend
from smriti.index import recency, snapshot
from smriti.index.budget import Budget
from smriti.index.indexed import IndexedBackend
from smriti.index.working_set import WorkingSet
from smriti.model import Association, EngramUpdate
from smriti.testing import GraphBuilder, RecallEqualityTests, StorageBackendTests
from smriti.testing.builders import T0
from smriti.testing.storage_suite import assert_engram_equal

Make = Callable[[str], IndexedBackend]


def _inner(root: Path, user: str) -> SqliteBackend:
    return SqliteBackend(user, root / user / DB_FILE)


@pytest.fixture
def indexed_factory(tmp_path: Path) -> Iterator[Make]:
    """``make(user)``: an opened IndexedBackend whose working set is loaded."""
    made: list[IndexedBackend] = []

    def make(user: str) -> IndexedBackend:
        snapshots = tmp_path / "store" / user / "working-set"
        inner = _inner(tmp_path / "store", user)
        backend = IndexedBackend(inner, 512, background=False, snapshot_dir=snapshots)
        backend.open()
        assert backend.state == "ready"
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


class TestWorkingSetConformance(StorageBackendTests):
    """Every clause of the storage contract, the reads answered by the working set."""

    @pytest.fixture
    def backend_factory(self, indexed_factory: Make) -> Make:
        return indexed_factory


class TestWorkingSetRecallEquality(RecallEqualityTests):
    """The engine recalls through the working set exactly what it recalls without it."""

    @pytest.fixture
    def backend_factory(self, indexed_factory: Make) -> Make:
        return indexed_factory


@pytest.fixture
def build() -> GraphBuilder:
    return GraphBuilder(8)


def _fill(backend: SqliteBackend | IndexedBackend, build: GraphBuilder, n: int) -> None:
    hub = build.cue("hub")
    for i in range(n):
        assoc = [Association(f"e{i:05d}", f"e{i - 1:05d}", 0.5 + i / (4 * n))] if i else []
        backend.add_memory(build.engram(i, content=f"memory number {i} words"), [hub], assoc)


def _answers(backend: SqliteBackend | IndexedBackend, build: GraphBuilder) -> tuple[object, ...]:
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
    )


def test_answers_what_the_backend_answers(tmp_path: Path, build: GraphBuilder) -> None:
    plain = _inner(tmp_path, "alice")
    plain.open()
    _fill(plain, build, 30)
    want = _answers(plain, build)
    plain.close()
    indexed = IndexedBackend(_inner(tmp_path, "alice"), 512, background=False)
    indexed.open()
    try:
        assert indexed.state == "ready"
        assert _answers(indexed, build) == want
    finally:
        indexed.close()


class _SlowStreams(SqliteBackend):
    """Streams its store slowly, so writes can land while a working set loads."""

    gate = threading.Event()

    def working_set_streams(self):  # type: ignore[no-untyped-def]
        cues, engrams, links, associations = super().working_set_streams()

        def slow_engrams():  # type: ignore[no-untyped-def]
            self.gate.wait(10)
            yield from engrams

        return cues, slow_engrams(), links, associations


def test_writes_during_a_background_load_are_in_the_loaded_set(
    tmp_path: Path, build: GraphBuilder
) -> None:
    plain = _inner(tmp_path, "alice")
    plain.open()
    _fill(plain, build, 10)
    plain.close()
    backend = IndexedBackend(_SlowStreams("alice", tmp_path / "alice" / DB_FILE), 512)
    backend.open()
    try:
        assert backend.state == "loading"
        # Answered by the backend meanwhile:
        assert backend.seek(Seek(k=3, text="number 4")).text[0][0] == "e00004"
        backend.add_memory(build.engram(50, content="written while loading"), [], [])
        backend.delete_engrams(["e00002"])
        backend.strengthen_engrams([EngramUpdate("e00005", access_count=41)])
        backend.update_engrams([EngramUpdate("e00006", importance=0.99)])
        _SlowStreams.gate.set()
        deadline = time.monotonic() + 10
        while backend.state != "ready" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert backend.state == "ready"
        assert backend.seek(Seek(k=3, text="written loading")).text[0][0] == "e00050"
        assert backend.get_engrams(["e00002"]) == []
        [five, six] = sorted(backend.get_engrams(["e00005", "e00006"]), key=lambda e: e.id)
        assert five.access_count == 41 and six.importance == pytest.approx(0.99)
        assert backend.count_engrams() == 10
    finally:
        backend.close()


def test_strengthening_reaches_the_backend_after_the_recall(
    tmp_path: Path, build: GraphBuilder
) -> None:
    backend = IndexedBackend(_inner(tmp_path, "alice"), 512, background=False)
    backend.open()
    _fill(backend, build, 5)
    backend.strengthen_engrams([EngramUpdate("e00001", access_count=7)])
    assert backend.get_engrams(["e00001"])[0].access_count == 7  # at once, from memory
    deadline = time.monotonic() + 5
    while backend.inner.get_engrams(["e00001"])[0].access_count != 7:
        assert time.monotonic() < deadline, "strengthening never reached the backend"
        time.sleep(0.02)
    backend.strengthen_engrams([EngramUpdate("e00002", access_count=9)])
    backend.close()  # writes what is still queued
    again = _inner(tmp_path, "alice")
    again.open()
    try:
        assert again.get_engrams(["e00002"])[0].access_count == 9
    finally:
        again.close()


def test_a_store_over_the_budget_stays_on_the_native_path(
    tmp_path: Path, build: GraphBuilder
) -> None:
    plain = _inner(tmp_path, "alice")
    plain.open()
    _fill(plain, build, 40)
    plain.close()
    backend = IndexedBackend(_inner(tmp_path, "alice"), 0, background=False)
    with capture_logs() as logs:
        backend.open()
    try:
        assert backend.state == "over budget"
        assert backend.seek(Seek(k=2, text="number 33")).text[0][0] == "e00033"
        [warning] = [e for e in logs if e["log_level"] == "warning"]
        assert "SMRITI_WORKING_SET_MB" in warning["event"]
    finally:
        backend.close()


def test_the_budget_evicts_the_least_recently_used() -> None:
    evicted: list[str] = []

    class Holder:
        def __init__(self, name: str) -> None:
            self.name = name

        def evict(self) -> None:
            evicted.append(self.name)

    budget = Budget()
    a, b, c = Holder("a"), Holder("b"), Holder("c")
    assert budget.admit(a, 40, 100) and budget.admit(b, 40, 100)
    budget.touch(a)
    assert budget.admit(c, 40, 100)
    assert evicted == ["b"] and budget.used() == 80
    assert not budget.admit(Holder("huge"), 101, 100)
    assert evicted == ["b"]


def _open(tmp_path: Path, background: bool = False, idle_save: float = 60.0) -> IndexedBackend:
    backend = IndexedBackend(
        _inner(tmp_path, "alice"), 512, background=background,
        snapshot_dir=tmp_path / "alice" / "working-set", idle_save=idle_save,
    )  # fmt: skip
    backend.open()
    return backend


def _loaded_from(logs: list[dict[str, object]]) -> str:
    [event] = [e for e in logs if e["event"] == "working set loaded"]
    return str(event["source"])


def test_a_clean_close_saves_the_working_set_and_the_next_open_loads_it(
    tmp_path: Path, build: GraphBuilder
) -> None:
    backend = _open(tmp_path)
    _fill(backend, build, 30)
    backend.strengthen_engrams([EngramUpdate("e00004", access_count=12)])
    want = _answers(backend, build)
    backend.close()
    assert (tmp_path / "alice" / "working-set" / "meta.json").exists()
    with capture_logs() as logs:
        again = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
        assert _answers(again, build) == want
        assert again.get_engrams(["e00004"])[0].access_count == 12
        again.add_memory(build.engram(77, content="after the snapshot"), [build.cue("hub")], [])
        assert again.seek(Seek(k=1, text="after snapshot")).text[0][0] == "e00077"
    finally:
        again.close()
    with capture_logs() as logs:
        third = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
        assert third.count_engrams() == 31
    finally:
        third.close()


def test_a_snapshot_is_not_used_after_a_crash_or_a_change_behind_its_back(
    tmp_path: Path, build: GraphBuilder
) -> None:
    backend = _open(tmp_path)
    _fill(backend, build, 10)
    backend.close()
    crashed = _open(tmp_path)
    crashed.add_memory(build.engram(40, content="stored before the crash"), [], [])
    crashed.inner.close()  # the process dies: no snapshot is saved
    crashed._closing.set()  # and its threads with it (else its saver keeps trying)
    with capture_logs() as logs:
        after_crash = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "store"
        assert after_crash.seek(Seek(k=1, text="before crash")).text[0][0] == "e00040"
    finally:
        after_crash.close()
    plain = _inner(tmp_path, "alice")  # a program that keeps no working set writes
    plain.open()
    plain.add_memory(build.engram(41, content="written behind its back"), [], [])
    plain.close()
    with capture_logs() as logs:
        changed = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "store"
        assert changed.seek(Seek(k=1, text="behind back")).text[0][0] == "e00041"
    finally:
        changed.close()
    (tmp_path / "alice" / "working-set" / "arrays.npz").write_bytes(b"not numpy")
    with capture_logs() as logs:
        damaged = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "store"
        assert damaged.count_engrams() == 12
    finally:
        damaged.close()


def test_reads_wait_for_a_loading_snapshot_instead_of_asking_the_backend(
    tmp_path: Path, build: GraphBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _open(tmp_path)
    _fill(backend, build, 12)
    backend.close()
    real_load = snapshot.load

    def slow_load(directory: Path) -> object:
        time.sleep(0.5)
        return real_load(directory)

    monkeypatch.setattr(snapshot, "load", slow_load)
    asked: list[str] = []
    again = _open(tmp_path, background=True)
    monkeypatch.setattr(again.inner, "seek", lambda q: asked.append("seek"))
    try:
        assert again.state == "loading"
        assert again.seek(Seek(k=1, text="number 7")).text[0][0] == "e00007"
        assert asked == [] and again.state == "ready"
    finally:
        again.close()


def _everything(backend: SqliteBackend | IndexedBackend, ids: list[str]) -> tuple[object, ...]:
    """Every edge and row around ``ids``, as the contract's reads return them."""
    around = backend.neighbourhood(Expand(ids, 1000, 10_000, 1000))
    rows = sorted(
        (e.id, e.content, e.importance, e.access_count, e.last_accessed_at, tuple(e.tags))
        for e in backend.get_engrams(ids, embeddings=False)
    )
    return (
        rows,
        sorted(
            (a.source_id, a.target_id, a.strength, a.relation_type) for a in around.associations
        ),  # fmt: skip
        sorted((lk.engram_id, lk.cue_id, lk.strength) for lk in around.links),
        around.degrees,
        {c: sorted(m) for c, m in around.members.items()},
        set(backend.iter_associations()),  # the stream too, packed and unpacked edges alike
    )


@pytest.mark.parametrize("chunk", [snapshot.SAVE_CHUNK, 7])
def test_changes_to_a_working_set_loaded_packed_survive_the_next_snapshot(
    tmp_path: Path, build: GraphBuilder, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot loads its edges packed and unpacks a memory's when it is touched: what
    is then forgotten, strengthened, linked or added must read (and be saved) exactly as
    in the store, next to the memories that stayed packed. (A save builds its rows and
    writes their texts a chunk at a time: 7 splits these 40 memories.)"""
    monkeypatch.setattr(snapshot, "SAVE_CHUNK", chunk)
    backend = _open(tmp_path)
    hub, side = build.cue("hub"), build.cue("side")
    for i in range(40):
        assoc = [Association(f"e{i:05d}", f"e{i - 1:05d}", 0.5, "semantic")] if i else []
        cues = [hub, side] if i % 3 == 0 else [hub]
        backend.add_memory(build.engram(i, content=f"memory number {i} words"), cues, assoc)
    backend.close()
    again = _open(tmp_path)
    ids = [f"e{i:05d}" for i in range(45)]
    try:
        # A new memory's links are kept beside the hub's packed members, not unpacked.
        again.add_memory(build.engram(43, content="a short-lived one"), [hub], [])
        assert again._ws is not None and again._ws.graph.c2e.size(hub.id) == 41
        assert _everything(again, ids) == _everything(again.inner, ids)
        again.delete_engrams(["e00043"])
        again.delete_engrams(["e00005", "e00012"])  # packed on both sides of their edges
        again.strengthen_engrams([EngramUpdate("e00020", access_count=9)])
        again.update_engrams([EngramUpdate("e00021", importance=0.9)])
        link = [Association("e00041", "e00002", 0.7, "temporal")]
        again.add_memory(build.engram(41, content="a late memory"), [side], link)
        again.add_memory(build.engram(42, content="another late one"), [hub, side], [])
        between_packed = Association("e00030", "e00002", 0.6, "causal")
        again.import_records([], [], [], [between_packed], [])
        again.delete_orphan_cues()
        again.flush_strengthening()
        want = _everything(again.inner, ids)
        assert _everything(again, ids) == want
    finally:
        again.close()
    with capture_logs() as logs:
        third = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
        assert _everything(third, ids) == want
    finally:
        third.close()


def test_forgetting_a_memory_loaded_packed_leaves_its_cues_and_neighbours_packed(
    tmp_path: Path, build: GraphBuilder
) -> None:
    """Removing a memory from a hub's members and from its neighbours' edges does not
    build their dicts (consolidation prunes thousands), and every read still answers as
    the store does, before and after the next snapshot."""
    backend = _open(tmp_path)
    hub = build.cue("hub")
    for i in range(30):
        assoc = [Association(f"e{i:05d}", f"e{i - 1:05d}", 0.5, "semantic")] if i else []
        backend.add_memory(build.engram(i, content=f"memory number {i} words"), [hub], assoc)
    backend.close()
    again = _open(tmp_path)
    ids = [f"e{i:05d}" for i in range(30)]
    try:
        again.delete_engrams(["e00005", "e00012"])
        graph = again._ws.graph  # type: ignore[union-attr]
        assert graph.c2e.size(hub.id) == 28 and hub.id not in graph.c2e._live
        assert {"e00004", "e00006", "e00011", "e00013"}.isdisjoint(
            graph.inn._live.keys() | graph.out._live.keys()
        )
        want = _everything(again.inner, ids)
        assert _everything(again, ids) == want
    finally:
        again.close()
    third = _open(tmp_path)
    try:
        assert _everything(third, ids) == want
    finally:
        third.close()


def test_a_snapshot_keeps_its_vectors_on_file_and_they_outlive_the_next_save(
    tmp_path: Path, build: GraphBuilder
) -> None:
    """The vectors of a snapshot stay in its file and are read when a search needs them;
    memories added past the saved rows, forgetting and the next save (which replaces the
    file being read) keep every search exact, and so does a file without spare rows."""
    backend = _open(tmp_path)
    _fill(backend, build, 30)
    backend.close()
    units = tmp_path / "alice" / "working-set" / "vec_units.npy"
    saved = np.load(units, mmap_mode="r")
    assert saved.shape[0] > 30 and not saved[30:].any()  # spare rows, zeros
    again = _open(tmp_path)
    try:
        rows = again._ws.vectors._rows  # type: ignore[union-attr]
        assert rows is not None and rows.file is not None and rows.base == 30
        for i in range(30, 80):  # past the spare rows: the cache grows out of the map
            again.add_memory(build.engram(i, content=f"memory number {i} words"), [], [])
        again.delete_engrams(["e00003", "e00040"])
        want = [again.seek(Seek(k=3, vector=build.vec(i))).vector for i in (7, 50, 79)]
        assert want == [
            again.inner.seek(Seek(k=3, vector=build.vec(i))).vector for i in (7, 50, 79)
        ]
        again._save_snapshot()  # the files under the live mapping are replaced
        assert [again.seek(Seek(k=3, vector=build.vec(i))).vector for i in (7, 50, 79)] == want
    finally:
        again.close()
    old = np.load(units)[:78]
    np.save(units, old)  # no spare rows, as snapshots were written before
    with capture_logs() as logs:
        third = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
        assert third._ws.vectors._rows.base == 78  # type: ignore[union-attr]
        assert [third.seek(Seek(k=3, vector=build.vec(i))).vector for i in (7, 50, 79)] == want
    finally:
        third.close()


def test_an_empty_store_saves_a_snapshot_that_loads(tmp_path: Path) -> None:
    _open(tmp_path).close()
    with capture_logs() as logs:
        again = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
        assert again.count_engrams() == 0 and again.list_page(Listing(5)) == []
    finally:
        again.close()


def _wait_for_save(logs: list[dict[str, object]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(e["event"] == "working set saved" for e in logs):
        assert time.monotonic() < deadline, "no idle save"
        time.sleep(0.05)


def test_an_idle_working_set_is_saved_so_a_later_crash_still_starts_from_it(
    tmp_path: Path, build: GraphBuilder
) -> None:
    backend = _open(tmp_path, idle_save=0.3)
    with capture_logs() as logs:
        _fill(backend, build, 12)
        _wait_for_save(logs)
    backend.inner.close()  # killed while idle, after the save
    with capture_logs() as logs:
        again = _open(tmp_path, idle_save=0.3)
    try:
        assert _loaded_from(logs) == "snapshot"
        assert again.count_engrams() == 12
        with capture_logs() as logs:
            again.add_memory(build.engram(50, content="after the idle save"), [], [])
            again.inner.close()  # killed right after a write: the snapshot misses it
        assert (tmp_path / "alice" / "working-set" / snapshot.STALE).exists()
    finally:
        again._closing.set()
    with capture_logs() as logs:
        third = _open(tmp_path, background=True)  # the stale snapshot is not preloaded
        third._settled.wait(10)
    try:
        assert _loaded_from(logs) == "store"
        assert third.seek(Seek(k=1, text="idle save")).text[0][0] == "e00050"
    finally:
        third.close()


def test_a_close_with_nothing_written_since_the_snapshot_does_not_save_it_again(
    tmp_path: Path, build: GraphBuilder
) -> None:
    backend = _open(tmp_path)
    _fill(backend, build, 5)
    backend.close()
    again = _open(tmp_path)
    assert again.seek(Seek(k=1, text="number 3")).text[0][0] == "e00003"
    with capture_logs() as logs:
        again.close()
    assert not [e for e in logs if e["event"] == "working set saved"]
    with capture_logs() as logs:
        third = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
    finally:
        third.close()


def test_a_save_that_a_write_overtakes_leaves_the_store_dirty(
    tmp_path: Path, build: GraphBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write applied while the files are written is not in them: the stamp must not
    say that they match the store."""
    backend = _open(tmp_path)
    _fill(backend, build, 5)
    real_save = snapshot.save

    def save_with_a_write_meanwhile(ws: object, directory: Path, stamp: str) -> None:
        real_save(ws, directory, stamp)  # type: ignore[arg-type]
        with backend._writing():
            backend.inner.add_memory(build.engram(60, content="sneaked in"), [], [])

    monkeypatch.setattr(snapshot, "save", save_with_a_write_meanwhile)
    backend._save_snapshot()
    saved = snapshot.stamp_of(tmp_path / "alice" / "working-set")
    assert saved is not None and backend.inner.get_meta(snapshot.STAMP_KEY) != saved
    monkeypatch.undo()
    backend.inner.close()
    backend._closing.set()
    with capture_logs() as logs:
        again = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "store"
        assert again.count_engrams() == 6
    finally:
        again.close()


def test_a_store_opened_without_a_working_set_drops_its_snapshot(
    tmp_path: Path, build: GraphBuilder
) -> None:
    """Writes made without the working set would not reach its snapshot."""
    from smriti import index
    from smriti.config import Settings

    backend = _open(tmp_path)
    _fill(backend, build, 3)
    backend.close()
    assert (tmp_path / "alice" / "working-set").exists()
    env = {"STORAGE_LOCATION": str(tmp_path), "ACCESSING_USER": "alice", "DB_TYPE": "sqlite"}
    inner = SqliteBackend.from_settings(Settings.from_env(env), "alice")
    inner.sole_writer = True  # as a store only one process opens (Kùzu) says
    user_dir = tmp_path / "alice"
    on = index.wrap(inner, enabled=True, budget_mb=64, user_dir=user_dir)
    assert isinstance(on, IndexedBackend) and (tmp_path / "alice" / "working-set").exists()
    off = index.wrap(inner, enabled=False, budget_mb=64, user_dir=user_dir)
    assert off is inner and not (tmp_path / "alice" / "working-set").exists()


def _versioned(backend: IndexedBackend, build: GraphBuilder, n: int) -> None:
    """``n`` memories with tags, clusters and a version chain (each fifth corrected)."""
    for i in range(n):
        e = build.engram(
            i,
            content=f"memory number {i} words",
            last_accessed_at=T0 + timedelta(hours=i // 3),
            created_at=T0 + timedelta(minutes=i // 2),
            tags=[f"t{i % 3}"],
            cluster_id=i % 4,
            supersedes=f"e{i - 1:05d}" if i % 5 == 1 else "",
            origin=("user", "agent", "import:smriti", "tool", "")[i % 5],
            principal="key:k1" if i % 2 else "",
        )
        backend.add_memory(e, [build.cue("hub")], [])
    backend.update_engrams(
        [
            EngramUpdate(
                f"e{i:05d}", superseded_by=f"e{i + 1:05d}", superseded_at=T0 + timedelta(days=i)
            )
            for i in range(0, n, 5)
        ]
    )


_LISTINGS = [
    Listing(7),
    Listing(4, memory_type="semantic"),
    Listing(50, tags=["t1", "new"]),
    Listing(50, tags=["t0", "new"], all_tags=True),
    Listing(3, include_superseded=False),
    Listing(50, cluster_id=2, since=T0 + timedelta(minutes=3), until=T0 + timedelta(minutes=11)),
    Listing(50, memory_type="procedural", include_superseded=False),
    Listing(50, memory_type="no such type"),
    Listing(50, origin="agent"),
    Listing(50, origin="import:", include_superseded=False),
    Listing(2, origin="user", memory_type="semantic"),
]


def _pages(backend: StorageBackend, listing: Listing) -> list[list[str]]:
    """Every page of ``listing`` (a page's last engram is the next one's key)."""
    pages: list[list[str]] = []
    after = None
    while True:
        page = backend.list_page(replace(listing, after=after, limit=min(listing.limit, 4)))
        if not page:
            return pages
        pages.append([e.id for e in page])
        after = list_key(page[-1])


def test_a_snapshot_keeps_the_version_fields_and_lists_as_the_store_does(
    tmp_path: Path, build: GraphBuilder
) -> None:
    backend = _open(tmp_path)
    _versioned(backend, build, 24)
    ids = [f"e{i:05d}" for i in range(24)]
    want = {e.id: e for e in backend.inner.get_engrams(ids)}
    backend.close()
    with capture_logs() as logs:
        again = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
        rows = again._ws.graph.rows  # type: ignore[union-attr]
        assert not rows._taken  # loaded packed
        # A filtered page peeks at the rows it passes over: only those it returns unpack.
        assert again.list_page(Listing(5, tags=["nope"])) == []
        page = again.list_page(Listing(2, cluster_id=3, include_superseded=False))
        assert set(rows._taken) == {e.id for e in page} and len(page) == 2
        for listing in _LISTINGS:
            assert _pages(again, listing) == _pages(again.inner, listing), listing
        for got in again.get_engrams(ids):
            assert_engram_equal(got, want[got.id])
        # New tags on a packed row: the text index follows, in memory and in the store.
        assert "e00002" in [i for i, _ in again.seek(Seek(k=9, text="t2")).text]
        again.update_engrams([EngramUpdate("e00002", tags=["new", "t0"])])
        again.strengthen_engrams([EngramUpdate("e00003", superseded_by="e00004",
                                                superseded_at=T0 + timedelta(days=9))])  # fmt: skip
        again.strengthen_engrams([EngramUpdate("e00003", access_count=40)])
        again.flush_strengthening()
        for listing in _LISTINGS:
            assert _pages(again, listing) == _pages(again.inner, listing), listing
        assert [i for i, _ in again.seek(Seek(k=5, text="new")).text] == ["e00002"]
        old_tag = [[i for i, _ in b.seek(Seek(k=9, text="t2")).text] for b in (again, again.inner)]
        assert old_tag[0] == old_tag[1] and "e00002" not in old_tag[0]
        changed = {e.id: e for e in again.inner.get_engrams(ids)}
        assert changed["e00003"].access_count == 40  # both queued updates reached the store
        assert changed["e00003"].superseded_by == "e00004"
    finally:
        again.close()
    with capture_logs() as logs:
        third = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "snapshot"
        for got in third.get_engrams(ids):
            assert_engram_equal(got, changed[got.id])
        assert [i for i, _ in third.seek(Seek(k=5, text="new")).text] == ["e00002"]
    finally:
        third.close()


def test_a_snapshot_of_an_older_format_is_rebuilt_from_the_store(
    tmp_path: Path, build: GraphBuilder
) -> None:
    backend = _open(tmp_path)
    _versioned(backend, build, 12)
    backend.close()
    meta_path = tmp_path / "alice" / "working-set" / "meta.json"
    meta = json.loads(meta_path.read_text())
    # What the previous version saved: format 2, rows without the version fields.
    meta.update(format=2, fields=meta["fields"][:-3])
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="another format"):
        snapshot.load(meta_path.parent)
    with capture_logs() as logs:
        again = _open(tmp_path)
    try:
        assert _loaded_from(logs) == "store"
        old = again.get_engrams(["e00000"])[0]
        assert (old.superseded_by, old.superseded_at) == ("e00001", T0)
        assert again.get_engrams(["e00001"])[0].supersedes == "e00000"
    finally:
        again.close()
    with capture_logs() as logs:
        third = _open(tmp_path)  # saved again at close, in this format
    try:
        assert _loaded_from(logs) == "snapshot"
    finally:
        third.close()


def test_list_page_from_memory_matches_the_reference_through_moves_and_merges(
    monkeypatch: pytest.MonkeyPatch, build: GraphBuilder
) -> None:
    """Pages read across the listing order's base and head (recall moves memories to
    the front; merges fold the head in), against ``listing_sorted``."""
    monkeypatch.setattr(recency, "HEAD_MAX", 8)
    rng = random.Random(3)
    ws = WorkingSet()
    engrams = {}
    for i in range(60):
        e = build.engram(
            i,
            last_accessed_at=T0 + timedelta(seconds=rng.randrange(20)),
            created_at=T0 + timedelta(seconds=rng.randrange(5)),
            tags=[f"t{i % 3}"],
            cluster_id=i % 2,
        )
        engrams[e.id] = e
    ws.put_engrams(list(engrams.values()))
    listings = [
        Listing(5),
        Listing(3, tags=["t1"]),
        Listing(4, memory_type="episodic", cluster_id=1),
    ]
    for step in range(120):
        key = f"e{rng.randrange(60):05d}"
        when = T0 + timedelta(seconds=rng.randrange(30), microseconds=rng.randrange(3))
        tags = [f"t{rng.randrange(3)}"]
        ws.update([EngramUpdate(key, last_accessed_at=when, tags=tags)])
        engrams[key] = engrams[key].with_changes(last_accessed_at=when, tags=tags)
        if step % 10 == 0:
            for listing in listings:
                want = [
                    e.id for e in listing_sorted(list(engrams.values()), replace(listing, limit=99))
                ]
                got: list[str] = []
                page = ws.list_page(listing)
                while page:
                    got += [e.id for e in page]
                    page = ws.list_page(replace(listing, after=list_key(page[-1])))
                assert got == want, (step, listing)


def test_equally_strong_associations_are_cut_by_id_as_the_backend_cuts_them(
    indexed_factory: Make, build: GraphBuilder
) -> None:
    backend = indexed_factory("alice")
    for i in (1, 4, 2, 3):  # stored out of id order
        backend.add_memory(build.engram(i), [], [])
    edges = [Association("e00001", f"e{i:05d}", 0.5) for i in (4, 2, 3)]
    backend.import_records([], [], [], edges, [])
    query = Expand(["e00001"], edges=2, cue_max_degree=10, engrams_per_cue=10)
    got = sorted((a.source_id, a.target_id) for a in backend.neighbourhood(query).associations)
    want = sorted(
        (a.source_id, a.target_id) for a in backend.inner.neighbourhood(query).associations
    )
    assert got == want == [("e00001", "e00002"), ("e00001", "e00003")]
