"""Write semantics specific to the FalkorDB backend: retried adds, reused ids, migration."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest
from smriti_backend_falkor.backend import SCHEMA_VERSION, FalkorBackend

from smriti.backend import BackendError, EngramUpdate, Expand, Link, Listing, Seek
from smriti.testing import T0, GraphBuilder

build = GraphBuilder(8)


def test_retried_add_memory_is_a_no_op(make_backend: Callable[..., FalkorBackend]) -> None:
    """What a retry after a lost reply does: nothing twice, no double CoOccurs increment."""
    backend = make_backend("alice")
    cues = [build.cue("a"), build.cue("b")]
    first = backend.add_memory(build.engram(1), cues, [])
    again = backend.add_memory(build.engram(1), cues, [])
    assert [c.id for c in again.cues] == [c.id for c in first.cues]
    assert backend.counts() == {
        "engrams": 1,
        "cues": 2,
        "links": 2,
        "associations": 0,
        "cooccurrences": 2,
    }
    assert {c.strength for c in backend.iter_cooccurrences()} == {1.0}


def test_reused_id_with_other_content_is_an_error(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice")
    backend.add_memory(build.engram(1), [], [])
    with pytest.raises(BackendError, match="already exists"):
        backend.add_memory(build.engram(1, content="something else"), [], [])
    [kept] = backend.get_engrams(["e00001"])
    assert kept.content == build.engram(1).content


def test_old_store_is_migrated_on_open(make_backend: Callable[..., FalkorBackend]) -> None:
    """Engrams written before cluster_id / tags_text existed are filled in at open."""
    backend = make_backend("alice")
    backend._write(
        "CREATE (:Engram {user: $user, id: 'old1', content: 'ancient walrus', summary: '',"
        " memory_type: 'semantic', importance: 0.5, access_count: 0, decay_factor: 1.0,"
        " created_at: '2020-01-01T00:00:00.000000Z',"
        " last_accessed_at: '2020-01-01T00:00:00.000000Z'})"
    )
    backend.set_meta("falkordb.schema_version", "0")
    backend.close()
    reopened = make_backend("alice")
    [old] = reopened.get_engrams(["old1"])
    assert (old.cluster_id, old.tags, old.source) == (-1, [], "")
    assert reopened.seek(Seek(3, text="walrus")).text[0][0] == "old1"
    assert reopened.get_meta("falkordb.schema_version") == SCHEMA_VERSION
    assert reopened.seek(Seek(1)).total == 1  # the engram count was computed once


def test_a_store_from_before_the_version_fields_opens_and_reads(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Schema version 3 stored no supersedes / superseded_by / superseded_at: such
    engrams read as a current first version everywhere, and can be superseded."""
    backend = make_backend("alice")
    engrams = [build.engram(i) for i in range(4)]
    backend.import_records(engrams[:2], [], [], [], [])
    backend.add_memory(engrams[2], [build.cue("old")], [])
    backend.add_memory(engrams[3], [], [])
    backend.update_engrams([EngramUpdate(engrams[1].id, cluster_id=2)])  # a Usage loop too
    # What version 3 wrote: the nodes as they are, less the new properties.
    backend._write(
        "MATCH (e:Engram {user: $user}) "
        "SET e.supersedes = null, e.superseded_by = null, e.superseded_at = null"
    )
    stored = [set(k) for [k] in backend._read("MATCH (e:Engram {user: $user}) RETURN keys(e)")]
    assert len(stored) == 4
    assert all("content" in k and not k & {"supersedes", "superseded_by"} for k in stored)
    backend.set_meta("falkordb.schema_version", "3")
    backend.close()
    reopened = make_backend("alice")
    assert reopened.get_meta("falkordb.schema_version") == SCHEMA_VERSION
    want = {e.id: e for e in engrams}
    want[engrams[1].id] = engrams[1].with_changes(cluster_id=2)
    reads = {
        "get_engrams": reopened.get_engrams(list(want)),
        "get_engrams bare": reopened.get_engrams(list(want), embeddings=False),
        "list_page": reopened.list_page(Listing(10, include_superseded=False)),
        "iter_engrams": list(reopened.iter_engrams()),
        "working set": list(reopened.working_set_streams()[1]),
    }
    for name, got in reads.items():
        assert sorted(e.id for e in got) == sorted(want), name
        for e in got:
            assert (e.supersedes, e.superseded_by, e.superseded_at) == ("", "", None), name
            assert (e.content, e.tags, e.cluster_id) == (
                want[e.id].content,
                want[e.id].tags,
                want[e.id].cluster_id,
            ), name
    when = T0 + timedelta(days=2, microseconds=1)
    reopened.update_engrams(
        [EngramUpdate(engrams[0].id, superseded_by="e00009", superseded_at=when)]
    )
    [old] = reopened.get_engrams([engrams[0].id])
    assert (old.superseded_by, old.superseded_at) == ("e00009", when)
    current = reopened.list_page(Listing(10, include_superseded=False))
    assert engrams[0].id not in {e.id for e in current} and len(current) == 3
    reopened.close()
    again = make_backend("alice")  # the version is kept: nothing runs twice
    assert again.get_meta("falkordb.schema_version") == SCHEMA_VERSION
    assert again.get_engrams([engrams[0].id])[0].superseded_by == "e00009"
    assert again.seek(Seek(1)).total == 4


def test_a_store_from_before_the_origin_fields_reads_them_as_unknown(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Schema version 4 stored no origin / principal: such engrams read as unknown ('')
    everywhere and pass no origin filter; newer ones keep theirs."""
    backend = make_backend("alice")
    old = build.engram(1)
    said = build.engram(2, origin="import:smriti", principal="key:k1")
    backend.add_memory(old, [build.cue("old")], [])
    backend.import_records([said], [], [], [], [])
    backend._write("MATCH (e:Engram {user: $user, id: 'e00001'}) "
                   "SET e.origin = null, e.principal = null")  # fmt: skip
    backend.set_meta("falkordb.schema_version", "4")
    backend.close()
    reopened = make_backend("alice")
    assert reopened.get_meta("falkordb.schema_version") == SCHEMA_VERSION
    reads = {
        "get_engrams": reopened.get_engrams([old.id, said.id]),
        "get_engrams bare": reopened.get_engrams([old.id, said.id], embeddings=False),
        "list_page": reopened.list_page(Listing(10)),
        "iter_engrams": list(reopened.iter_engrams()),
        "working set": list(reopened.working_set_streams()[1]),
    }
    for name, got in reads.items():
        origins = {e.id: (e.origin, e.principal) for e in got}
        assert origins == {old.id: ("", ""), said.id: ("import:smriti", "key:k1")}, name
    assert [e.id for e in reopened.list_page(Listing(10, origin="import:"))] == [said.id]
    assert reopened.list_page(Listing(10, origin="user")) == []


def test_version_fields_reach_the_working_set_windows(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """A chain written by import and by add_memory, then superseded by update_engrams,
    comes back whole from the windowed stream a working set loads from."""
    backend = make_backend("alice")
    backend.id_window = 3  # type: ignore[misc]  # several windows, some without engrams
    when = T0 + timedelta(hours=7, microseconds=42)
    first = build.engram(1, superseded_by="e00002", superseded_at=when)
    second = build.engram(2, supersedes="e00001")
    third = build.engram(3, supersedes="e00002", tags=["kept"])
    backend.import_records([first, second], [build.cue("x")], [], [], [])
    backend.add_memory(third, [build.cue("y"), build.cue("z")], [])
    backend.update_engrams(
        [EngramUpdate("e00002", superseded_by="e00003", superseded_at=when, tags=["fixed"])]
    )
    second = second.with_changes(superseded_by="e00003", superseded_at=when, tags=["fixed"])
    want = {e.id: e for e in (first, second, third)}
    for name, stream in (
        ("working set", backend.working_set_streams()[1]),
        ("iter_engrams", backend.iter_engrams(batch_size=2)),
    ):
        got = {e.id: e for e in stream}
        assert got.keys() == want.keys(), name
        for e in got.values():
            w = want[e.id]
            assert (e.supersedes, e.superseded_by, e.superseded_at, e.tags) == (
                w.supersedes,
                w.superseded_by,
                w.superseded_at,
                w.tags,
            ), name


def test_batched_writes_cross_batch_boundaries(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice")
    backend.write_batch = 7  # type: ignore[misc]
    engrams = [build.engram(i) for i in range(30)]
    backend.import_records(engrams, [], [], [], [])
    backend.update_engrams([EngramUpdate(e.id, cluster_id=3) for e in engrams])
    assert {s.cluster_id for s in backend.engram_stats()} == {3}
    assert backend.delete_engrams([e.id for e in engrams[:20]] + ["nope"]) == 20
    assert backend.count_engrams() == 10


def test_edge_pages_skip_nothing_when_edges_are_deleted_meanwhile(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Consolidation reads associations while it deletes pruned engrams: a page after
    the last pair seen, not SKIP n, so deleting earlier edges hides no later one."""
    from smriti.backend import Association

    backend = make_backend("alice")
    backend.read_batch = 3  # type: ignore[misc]  # small pages, so deletes fall between
    engrams = [build.engram(i) for i in range(1, 13)]
    backend.import_records(engrams, [], [], [], [])
    doomed, kept = engrams[:4], engrams[4:]
    edges = [Association(a.id, b.id, 0.5) for a in doomed for b in doomed if a.id < b.id]
    edges += [Association(a.id, b.id, 0.9) for a, b in zip(kept, kept[1:], strict=False)]
    backend.import_records([], [], [], edges, [])
    pages = backend.iter_associations()
    first = [next(pages) for _ in range(3)]  # doomed edges sort first
    assert all(e.source_id in {d.id for d in doomed} for e in first)
    backend.delete_engrams([e.id for e in doomed])
    rest = {(e.source_id, e.target_id) for e in pages}
    assert rest == {(a.id, b.id) for a, b in zip(kept, kept[1:], strict=False)}


def test_degrees_and_engram_count_follow_every_write(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Both are kept by the writes (not counted at read time), so every write path counts."""
    backend = make_backend("alice")
    engrams = [build.engram(i) for i in range(6)]
    cue = build.cue("shared")
    links = [Link(e.id, cue.id) for e in engrams]
    backend.import_records([*engrams, engrams[0]], [cue], links * 2, [], [])  # repeats
    backend.import_records([engrams[1]], [], links[1:2], [], [])  # replaces, adds nothing
    backend.add_memory(build.engram(10), [build.cue("shared")], [])
    assert backend.delete_engrams([engrams[2].id, engrams[3].id, "missing"]) == 2
    seeds = backend.seek(Seek(1, cue_names=["shared"]))
    assert seeds.total == backend.count_engrams() == 5
    assert [(c.cue_id, c.degree) for c in seeds.cues] == [(cue.id, 5)]
    assert backend.neighbourhood(Expand([engrams[0].id], 0, 10, 0)).degrees == {cue.id: 5}


def test_embeddings_read_back_exactly_as_float32(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Vectors travel as preformatted literals (``records.FloatList``): every float32,
    tiny, huge and negative ones included, must come back bit for bit, through each
    write that sends one."""
    backend = make_backend("alice")
    values = np.random.default_rng(7).standard_normal(8).astype(np.float32)
    values[:4] = [1e-38, -3.4e38, 1.0 / 3.0, -0.0]
    engram = build.engram(1)
    engram.embedding = values
    cue = build.cue("exact")
    cue.embedding = values[::-1].copy()
    backend.add_memory(engram, [cue], [])
    imported = build.engram(2)
    imported.embedding = -values
    backend.import_records([imported], [], [], [], [])
    got = {e.id: e.embedding for e in backend.get_engrams([engram.id, imported.id])}
    assert np.array_equal(got[engram.id], values)
    assert np.array_equal(got[imported.id], -values)
    (stored,) = backend.get_cues(["exact"])
    assert np.array_equal(stored.embedding, cue.embedding)


def test_an_engram_without_the_packed_embedding_reads_its_vector(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Reads take the embedding from its base64 copy; an engram stored before that copy
    existed (only the vecf32 property) reads back the same values."""
    backend = make_backend("alice")
    values = np.random.default_rng(3).standard_normal(8).astype(np.float32)
    engram = build.engram(1)
    engram.embedding = values
    backend.add_memory(engram, [], [])
    has_copy = "MATCH (e:Engram {user: $user, id: $id}) RETURN e.embedding_b64 IS NOT NULL"
    assert backend._read(has_copy, id=engram.id) == [[True]]
    drop_copy = "MATCH (e:Engram {user: $user, id: $id}) SET e.embedding_b64 = NULL"
    backend._write(drop_copy, id=engram.id)
    assert backend._read(has_copy, id=engram.id) == [[False]]
    (old,) = backend.get_engrams([engram.id])
    assert np.array_equal(old.embedding, values)
    assert [np.array_equal(e.embedding, values) for e in backend.iter_engrams()] == [True]
