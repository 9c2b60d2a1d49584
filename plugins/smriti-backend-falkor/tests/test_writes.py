"""Write semantics specific to the FalkorDB backend: retried adds, reused ids, migration."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from smriti_backend_falkor.backend import FalkorBackend

from smriti.errors import BackendError
from smriti.model import Link
from smriti.reads import Expand, Seek
from smriti.testing import GraphBuilder

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
    assert reopened.get_meta("falkordb.schema_version") == "3"
    assert reopened.seek(Seek(1)).total == 1  # the engram count was computed once


def test_batched_writes_cross_batch_boundaries(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice")
    backend.write_batch = 7  # type: ignore[misc]
    engrams = [build.engram(i) for i in range(30)]
    backend.import_records(engrams, [], [], [], [])
    from smriti.model import EngramUpdate

    backend.update_engrams([EngramUpdate(e.id, cluster_id=3) for e in engrams])
    assert {s.cluster_id for s in backend.engram_stats()} == {3}
    assert backend.delete_engrams([e.id for e in engrams[:20]] + ["nope"]) == 20
    assert backend.count_engrams() == 10


def test_edge_pages_skip_nothing_when_edges_are_deleted_meanwhile(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Consolidation reads associations while it deletes pruned engrams: a page after
    the last pair seen, not SKIP n, so deleting earlier edges hides no later one."""
    from smriti.model import Association

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
