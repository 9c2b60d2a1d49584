"""The storage conformance suite: one test per clause of the StorageBackend contract.

Subclass :class:`StorageBackendTests` and override ``backend_factory`` to return a
callable ``make(user) -> StorageBackend`` that gives an opened, empty store for ``user``.
Several ``make`` calls in one test with different users must share one underlying store
(same directory, server or graph), so tenant isolation is tested for real. The fixture
owns cleanup. Override ``reopen`` when closing and re-making is not how the backend
reopens a store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, ClassVar

import numpy as np
import pytest

from smriti.backend import (
    Expand,
    Listing,
    Neighbourhood,
    Seek,
    StorageBackend,
    list_key,
    listing_sorted,
    unit,
)
from smriti.errors import BackendError
from smriti.model import Association, CoOccurrence, Cue, Engram, EngramUpdate, Link
from smriti.testing.builders import T0, GraphBuilder

Make = Callable[[str], StorageBackend]

#: Queries that are query syntax in some engine; backends must treat them as plain text.
NASTY_QUERIES = (
    '"unbalanced quote',
    "wild*card",
    "field:value",
    "close)paren",
    "it's",
    "back\\slash",
    '"}) MATCH (n) DETACH DELETE n //',
    "'; DROP TABLE Engram; --",
    "a AND OR NOT b",
    "~fuzzy^2 [range TO x] {x} +must -not",
    "   ",
    "",
)


def _assert_utc(ts: datetime) -> None:
    assert ts.tzinfo is not None, f"naive timestamp {ts!r} (must be tz-aware UTC)"
    assert ts.utcoffset() == timedelta(0), f"timestamp {ts!r} is not UTC"


def _assert_same_time(got: datetime, want: datetime) -> None:
    _assert_utc(got)
    assert abs(got - want) <= timedelta(milliseconds=1), f"{got!r} != {want!r}"


def assert_engram_equal(got: Engram, want: Engram) -> None:
    """Field-by-field equality (floats and times within storage precision)."""
    assert got.id == want.id
    assert got.content == want.content
    assert got.summary == want.summary
    assert got.memory_type == want.memory_type
    assert got.importance == pytest.approx(want.importance, abs=1e-6)
    assert got.access_count == want.access_count
    assert got.decay_factor == pytest.approx(want.decay_factor, abs=1e-6)
    assert got.source == want.source
    assert list(got.tags) == list(want.tags)
    assert got.cluster_id == want.cluster_id
    assert got.supersedes == want.supersedes
    assert got.superseded_by == want.superseded_by
    assert got.origin == want.origin, f"{got.id}: origin {got.origin!r} != {want.origin!r}"
    assert got.principal == want.principal, f"{got.id}: principal {got.principal!r}"
    if want.superseded_at is None:
        assert got.superseded_at is None, f"{got.id}: superseded_at {got.superseded_at!r}"
    else:
        assert got.superseded_at is not None, f"{got.id}: superseded_at lost"
        _assert_same_time(got.superseded_at, want.superseded_at)
    _assert_same_time(got.created_at, want.created_at)
    _assert_same_time(got.last_accessed_at, want.last_accessed_at)
    assert got.embedding is not None, f"engram {got.id} came back without embedding"
    assert want.embedding is not None
    np.testing.assert_allclose(
        np.asarray(got.embedding, dtype=np.float32), want.embedding, atol=1e-5
    )


def _edge_key(e: Association) -> tuple[str, str, str]:
    return (e.source_id, e.target_id, e.relation_type)


# -- the fine reads the suite checks, asked through seek and neighbourhood ------------------
def vector_hits(
    backend: StorageBackend, vector: np.ndarray, k: int, memory_type: str | None = None
) -> list[tuple[str, float]]:
    """``seek``'s vector channel alone."""
    return backend.seek(Seek(k=k, vector=vector, memory_type=memory_type)).vector


def text_hits(
    backend: StorageBackend, text: str, k: int, memory_type: str | None = None
) -> list[tuple[str, float]]:
    """``seek``'s lexical channel alone."""
    return backend.seek(Seek(k=k, text=text, memory_type=memory_type)).text


def nearest_cues(backend: StorageBackend, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The ``k`` cues nearest ``vector`` (cue id, similarity), best first."""
    query = Seek(k=1, cue_vectors=np.asarray([vector]), cue_neighbours=k, cue_similarity=-1.0)
    found = [(m.cue_id, m.similarity) for m in backend.seek(query).cues]
    return sorted(found, key=lambda m: (-m[1], m[0]))


def links_of(backend: StorageBackend, ids: list[str]) -> list[Link]:
    """``neighbourhood``'s EncodedBy edges of ``ids``."""
    return backend.neighbourhood(Expand(ids, 0, 0, 0)).links


def edges_of(backend: StorageBackend, ids: list[str], per_engram: int) -> list[Association]:
    """``neighbourhood``'s AssociatedWith edges of ``ids``."""
    return backend.neighbourhood(Expand(ids, per_engram, 0, 0)).associations


class StorageBackendTests:
    """Base class of backend conformance tests (langchain-tests style).

    Override the ``backend_factory`` fixture. Class attributes tune sizes: ``dims`` is the
    embedding width, ``index_threshold`` the ``min_engrams`` passed to ``ensure_indexes``
    and ``indexed_engrams`` how many engrams the indexed-search test loads.
    """

    dims: ClassVar[int] = 8
    index_threshold: ClassVar[int] = 50
    indexed_engrams: ClassVar[int] = 300
    large_content_bytes: ClassVar[int] = 1_000_000

    # -- fixtures and hooks -------------------------------------------------------------
    @pytest.fixture
    def backend_factory(self) -> Make:
        """Return ``make(user)`` giving an opened, empty backend; subclasses override."""
        raise NotImplementedError("override the backend_factory fixture")

    @pytest.fixture
    def backend(self, backend_factory: Make) -> StorageBackend:
        """An opened, empty store for user ``alice``."""
        self._make = backend_factory
        return backend_factory("alice")

    @pytest.fixture
    def build(self) -> GraphBuilder:
        """Deterministic record builders with this suite's ``dims``."""
        return GraphBuilder(self.dims)

    def reopen(self, backend: StorageBackend) -> StorageBackend:
        """Close ``backend`` and open the same user's store again."""
        backend.close()
        return self._make(backend.user)

    # -- helpers ------------------------------------------------------------------------
    def store(
        self,
        backend: StorageBackend,
        engram: Engram,
        cues: list[Cue] | None = None,
        associations: list[Association] | None = None,
    ) -> Any:
        return backend.add_memory(engram, cues or [], associations or [])

    def load(self, backend: StorageBackend, build: GraphBuilder, n: int) -> list[Engram]:
        engrams = [build.engram(i) for i in range(n)]
        backend.import_records(engrams, [], [], [], [])
        return engrams

    # -- add_memory and reads -------------------------------------------------------------
    def test_add_memory_round_trips_every_field(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        engram = build.engram(1, tags=["alpha", "beta gamma"], cluster_id=7, importance=0.25)
        stored = self.store(backend, engram, [build.cue("apple")])
        assert stored.engram.id == engram.id
        [got] = backend.get_engrams([engram.id])
        assert_engram_equal(got, engram)

    def test_get_engrams_skips_unknown_ids(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        self.store(backend, build.engram(1))
        self.store(backend, build.engram(2))
        got = backend.get_engrams(["e00002", "missing", "e00001"])
        assert sorted(e.id for e in got) == ["e00001", "e00002"]
        assert backend.get_engrams([]) == []
        bare = {e.id: e for e in backend.get_engrams(["e00002", "e00001"], embeddings=False)}
        for want in (build.engram(1), build.engram(2)):
            got_one = bare[want.id]
            if got_one.embedding is None:  # a backend may leave it out, nothing else
                got_one = got_one.with_changes(embedding=want.embedding)
            assert_engram_equal(got_one, want)

    def test_add_memory_returns_cues_as_stored(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        stored = self.store(backend, build.engram(1), [build.cue("apple"), build.cue("pear")])
        assert sorted(c.id for c in stored.cues) == ["c-apple", "c-pear"]
        got = {c.name: c for c in backend.get_cues(["apple", "pear", "plum"])}
        assert set(got) == {"apple", "pear"}
        assert got["apple"].cue_type == "keyword"
        assert got["apple"].embedding is not None
        np.testing.assert_allclose(got["apple"].embedding, build.cue("apple").embedding, atol=1e-5)

    def test_cue_merges_on_name(self, backend: StorageBackend, build: GraphBuilder) -> None:
        first = build.cue("apple")
        self.store(backend, build.engram(1), [first])
        again = build.cue("apple", seed=99)  # a new id and embedding for the same name
        stored = self.store(backend, build.engram(2), [again])
        assert [c.id for c in stored.cues] == [first.id], "an existing cue must keep its id"
        np.testing.assert_allclose(stored.cues[0].embedding, first.embedding, atol=1e-5)
        assert backend.counts()["cues"] == 1
        links = links_of(backend, ["e00001", "e00002"])
        assert sorted((lk.engram_id, lk.cue_id) for lk in links) == [
            ("e00001", first.id),
            ("e00002", first.id),
        ]

    def test_duplicate_cue_in_one_memory_makes_one_edge(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        apple = build.cue("apple")
        stored = self.store(backend, build.engram(1), [apple, build.cue("apple", seed=5), apple])
        assert {c.id for c in stored.cues} == {apple.id}
        counts = backend.counts()
        assert counts["cues"] == 1
        assert counts["links"] == 1, "duplicate cues must not make duplicate EncodedBy edges"
        assert counts["cooccurrences"] == 0, "a cue must not co-occur with itself"
        [link] = links_of(backend, ["e00001"])
        assert link.strength == pytest.approx(1.0)

    def test_cooccurs_both_directions_and_incremented(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        a, b, c = build.cue("a1"), build.cue("b1"), build.cue("c1")
        self.store(backend, build.engram(1), [a, b, c])
        assert backend.counts()["cooccurrences"] == 6
        self.store(backend, build.engram(2), [a, b])
        got = {(x.source_id, x.target_id): x.strength for x in backend.iter_cooccurrences()}
        assert len(got) == 6
        assert got[(a.id, b.id)] == pytest.approx(2.0)
        assert got[(b.id, a.id)] == pytest.approx(2.0)
        assert got[(a.id, c.id)] == pytest.approx(1.0)
        assert got[(c.id, b.id)] == pytest.approx(1.0)

    def test_associations_listed_from_both_ends(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        self.store(backend, build.engram(1))
        assoc = Association("e00002", "e00001", 0.8, "semantic", T0)
        self.store(backend, build.engram(2), associations=[assoc])
        for end in ("e00001", "e00002"):
            [got] = edges_of(backend, [end], 10)
            assert (got.source_id, got.target_id) == ("e00002", "e00001")
            assert got.strength == pytest.approx(0.8)
            assert got.relation_type == "semantic"
        assert edges_of(backend, ["missing"], 10) == []

    def test_associations_of_keeps_strongest_per_engram(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        for i in range(1, 4):
            self.store(backend, build.engram(i))
        assocs = [Association("e00000", f"e0000{i}", s) for i, s in ((1, 0.75), (2, 0.9), (3, 0.8))]
        self.store(backend, build.engram(0), associations=assocs)
        got = edges_of(backend, ["e00000"], 2)
        assert sorted(a.target_id for a in got) == ["e00002", "e00003"]

    def test_association_to_missing_target_is_skipped(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        self.store(backend, build.engram(1))
        assocs = [Association("e00002", "gone", 0.9), Association("e00002", "e00001", 0.7)]
        self.store(backend, build.engram(2), associations=assocs)
        assert backend.counts()["associations"] == 1
        assert [a.target_id for a in backend.iter_associations()] == ["e00001"]

    def test_add_memory_failure_leaves_nothing(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        broken = Cue(id="c-broken", name="broken", cue_type="keyword", embedding=_Unconvertible())
        engram = build.engram(1)
        with pytest.raises(Exception):  # noqa: B017 - any error, as long as nothing is left
            self.store(backend, engram, [build.cue("fine"), broken])
        assert backend.count_engrams() == 0
        assert backend.get_engrams([engram.id]) == []
        assert all(v == 0 for v in backend.counts().values()), backend.counts()
        assert vector_hits(backend, engram.embedding, 5) == []
        assert text_hits(backend, "memory", 5) == []
        self.store(backend, engram, [build.cue("fine")])  # the store still works
        assert backend.count_engrams() == 1

    def test_add_memory_keeps_the_cluster_given(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        # The engine's association search picks the cluster and the edges, then writes.
        self.store(backend, build.engram(1).with_changes(cluster_id=7))
        engram = build.engram(2).with_changes(cluster_id=7)
        found = [Association(engram.id, "e00001", 0.8), Association(engram.id, "gone", 0.7)]
        stored = backend.add_memory(engram, [build.cue("fine")], found)
        assert stored.engram.cluster_id == 7
        [got] = backend.get_engrams([engram.id])
        assert_engram_equal(got, engram)
        assert [(a.source_id, a.target_id) for a in backend.iter_associations()] == [
            (engram.id, "e00001")
        ]
        assert backend.counts()["links"] == 1
        # A cluster with no surviving association target is still recorded.
        lone = build.engram(3).with_changes(cluster_id=4)
        stored = backend.add_memory(lone, [], [Association(lone.id, "gone", 0.9)])
        [got] = backend.get_engrams([lone.id])
        assert got.cluster_id == stored.engram.cluster_id == 4
        assert backend.counts()["associations"] == 1

    # -- updates and deletes ------------------------------------------------------------
    def test_update_engrams_is_partial(self, backend: StorageBackend, build: GraphBuilder) -> None:
        engram = build.engram(1)
        self.store(backend, engram)
        later = T0 + timedelta(days=3, microseconds=456000)
        backend.update_engrams(
            [
                EngramUpdate(engram.id, access_count=9, last_accessed_at=later),
                EngramUpdate("missing", access_count=1),
            ]
        )
        [got] = backend.get_engrams([engram.id])
        assert_engram_equal(got, engram.with_changes(access_count=9, last_accessed_at=later))
        backend.update_engrams([EngramUpdate(engram.id, decay_factor=0.33, importance=0.9)])
        [got] = backend.get_engrams([engram.id])
        want = engram.with_changes(
            access_count=9, last_accessed_at=later, decay_factor=0.33, importance=0.9
        )
        assert_engram_equal(got, want)
        assert backend.count_engrams() == 1

    def test_version_fields_round_trip(self, backend: StorageBackend, build: GraphBuilder) -> None:
        # A correction: the new version names the old one; the old one is marked.
        old = build.engram(1)
        new = build.engram(2, supersedes=old.id)
        self.store(backend, old)
        self.store(backend, new)
        got = {e.id: e for e in backend.get_engrams([old.id, new.id])}
        assert_engram_equal(got[old.id], old)
        assert_engram_equal(got[new.id], new)
        when = T0 + timedelta(days=4, microseconds=123000)
        backend.update_engrams([EngramUpdate(old.id, superseded_by=new.id, superseded_at=when)])
        want = old.with_changes(superseded_by=new.id, superseded_at=when)
        assert_engram_equal(backend.get_engrams([old.id])[0], want)
        assert_engram_equal({e.id: e for e in backend.iter_engrams()}[old.id], want)
        assert_engram_equal(backend.list_page(Listing(5))[-1], want)
        again = self.reopen(backend)
        try:
            assert_engram_equal(again.get_engrams([old.id])[0], want)
            assert_engram_equal(again.get_engrams([new.id])[0], new)
        finally:
            again.close()

    def test_origin_fields_round_trip(self, backend: StorageBackend, build: GraphBuilder) -> None:
        # Who said it: written once with the memory, read back by every read, kept by
        # updates, and '' (unknown) when never set.
        said = build.engram(1, origin="user", principal="key:k1 \u00e9'\"")
        written = build.engram(2, origin="agent")
        imported = build.engram(3, origin="import:smriti", principal="issuer|subject")
        unknown = build.engram(4)
        for e in (said, written, imported, unknown):
            self.store(backend, e)
        got = {e.id: e for e in backend.get_engrams([said.id, written.id, imported.id, unknown.id])}
        for e in (said, written, imported, unknown):
            assert_engram_equal(got[e.id], e)
        assert got[unknown.id].origin == "" and got[unknown.id].principal == ""
        backend.update_engrams([EngramUpdate(said.id, access_count=7, tags=["x"])])
        want = said.with_changes(access_count=7, tags=["x"])
        assert_engram_equal(backend.get_engrams([said.id])[0], want)
        assert_engram_equal({e.id: e for e in backend.iter_engrams()}[said.id], want)
        listed = {e.id: e for e in backend.list_page(Listing(10))}
        assert_engram_equal(listed[imported.id], imported)
        # The origin filter: an exact value, or a prefix ending in ':'; before the limit.
        filters = {
            "user": [said.id],
            "agent": [written.id],
            "import:": [imported.id],
            "import:smriti": [imported.id],
            "import:x": [],
            "tool": [],
        }
        for wanted, ids in filters.items():
            assert [e.id for e in backend.list_page(Listing(1, origin=wanted))] == ids, wanted
        again = self.reopen(backend)
        try:
            assert_engram_equal(again.get_engrams([said.id])[0], want)
            assert_engram_equal(again.get_engrams([imported.id])[0], imported)
        finally:
            again.close()

    def test_update_tags_replaces_them_and_the_text_search_follows(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        e = build.engram(1, content="plain words", summary="s", tags=["ocelot"])
        self.store(backend, e)
        assert [i for i, _ in text_hits(backend, "ocelot", 5)] == [e.id]
        backend.update_engrams([EngramUpdate(e.id, tags=["margay", "work"], importance=0.8)])
        assert_engram_equal(
            backend.get_engrams([e.id])[0], e.with_changes(tags=["margay", "work"], importance=0.8)
        )
        assert text_hits(backend, "ocelot", 5) == []
        assert [i for i, _ in text_hits(backend, "margay", 5)] == [e.id]
        backend.update_engrams([EngramUpdate(e.id, tags=[])])
        assert backend.get_engrams([e.id])[0].tags == []

    def test_strengthen_engrams_is_read_back_at_once_and_kept(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        # Recall strengthens twice in a row; a backend may write after returning, but
        # every read (by id, listing, stats, export, another session) sees both.
        engrams = [build.engram(i, last_accessed_at=T0) for i in range(1, 4)]
        for e in engrams:
            self.store(backend, e)
        first, second = T0 + timedelta(days=2), T0 + timedelta(days=2, seconds=5)
        backend.strengthen_engrams(
            [EngramUpdate(engrams[0].id, access_count=1, last_accessed_at=first, decay_factor=0.9)]
        )
        backend.strengthen_engrams(
            [
                EngramUpdate(e.id, access_count=2, last_accessed_at=second, decay_factor=0.95)
                for e in engrams[:2]
            ]
            + [EngramUpdate("missing", access_count=1)]
        )
        want = {
            e.id: e.with_changes(access_count=2, last_accessed_at=second, decay_factor=0.95)
            for e in engrams[:2]
        } | {engrams[2].id: engrams[2]}
        for e in backend.get_engrams(list(want)):
            assert_engram_equal(e, want[e.id])
        assert [e.id for e in backend.list_page(Listing(2))] == ["e00002", "e00001"]
        stats = {s.id: (s.access_count, s.decay_factor) for s in backend.engram_stats()}
        assert stats["e00001"] == (2, 0.95), stats
        assert stats["e00003"] == (engrams[2].access_count, engrams[2].decay_factor)
        assert {e.id: e.access_count for e in backend.iter_engrams()}["e00002"] == 2
        backend.strengthen_engrams([EngramUpdate(engrams[2].id, access_count=7)])
        again = self.reopen(backend)
        try:
            got = {e.id: e for e in again.get_engrams(list(want))}
            for key, e in want.items():
                expect = e.with_changes(access_count=7) if key == "e00003" else e
                assert_engram_equal(got[key], expect)
        finally:
            again.close()

    def test_update_cluster_ids_in_batch(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        engrams = self.load(backend, build, 30)
        backend.update_engrams(
            [EngramUpdate(e.id, cluster_id=i % 3) for i, e in enumerate(engrams)]
        )
        stats = {s.id: s.cluster_id for s in backend.engram_stats()}
        assert stats == {e.id: i % 3 for i, e in enumerate(engrams)}
        got = {e.id: e for e in backend.get_engrams([e.id for e in engrams])}
        for i, e in enumerate(engrams):
            assert_engram_equal(got[e.id], e.with_changes(cluster_id=i % 3))

    def test_many_updates_of_different_fields_each_change_only_their_fields(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        # Consolidation's shape: decay factors and cluster ids for overlapping sets of
        # engrams, in one call, large enough for a backend to batch or stage them.
        engrams = self.load(backend, build, 1200)
        updates = [EngramUpdate(e.id, decay_factor=0.5) for e in engrams[:800]]
        updates += [EngramUpdate(e.id, cluster_id=7) for e in engrams[400:]]
        updates += [EngramUpdate(engrams[0].id, importance=0.75, cluster_id=3)]
        updates += [EngramUpdate(engrams[1].id, access_count=4)]
        backend.update_engrams([*updates, EngramUpdate(engrams[2].id, decay_factor=0.25)])
        got = {e.id: e for e in backend.get_engrams([e.id for e in engrams])}
        for i, e in enumerate(engrams):
            want = e.with_changes(
                decay_factor=0.25 if i == 2 else 0.5 if i < 800 else e.decay_factor,
                cluster_id=3 if i == 0 else 7 if i >= 400 else e.cluster_id,
                importance=0.75 if i == 0 else e.importance,
                access_count=4 if i == 1 else e.access_count,
            )
            assert_engram_equal(got[e.id], want)

    def test_delete_engrams_cascades_and_counts_existing(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        shared, own = build.cue("shared"), build.cue("own")
        self.store(backend, build.engram(1), [shared, own])
        self.store(backend, build.engram(2), [shared], [Association("e00002", "e00001", 0.9)])
        self.store(backend, build.engram(3), [shared], [Association("e00003", "e00002", 0.8)])
        assert backend.delete_engrams(["e00002", "missing", "e00002"]) == 1
        assert backend.delete_engrams(["missing"]) == 0
        assert sorted(e.id for e in backend.iter_engrams()) == ["e00001", "e00003"]
        counts = backend.counts()
        assert (counts["engrams"], counts["links"], counts["associations"]) == (2, 3, 0)
        assert backend.seek(Seek(k=1)).total == 2
        assert edges_of(backend, ["e00001", "e00003"], 10) == []
        assert "e00002" not in [i for i, _ in vector_hits(backend, build.vec(10_002), 5)]
        assert "e00002" not in [i for i, _ in text_hits(backend, "number 2", 5)]
        assert "e00002" not in [i for i, _ in text_hits(backend, "summary", 5)]
        members = backend.neighbourhood(Expand(["e00001"], 0, 10, 10)).members
        assert {e for e, _ in members[shared.id]} == {"e00001", "e00003"}

    def test_delete_orphan_cues_removes_cooccurs(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        a, b, c = build.cue("keep"), build.cue("orphan1"), build.cue("orphan2")
        self.store(backend, build.engram(1), [a, b, c])
        self.store(backend, build.engram(2), [a])
        assert backend.delete_orphan_cues() == 0
        backend.delete_engrams(["e00001"])
        assert backend.delete_orphan_cues() == 2
        assert [x.id for x in backend.iter_cues()] == [a.id]
        assert list(backend.iter_cooccurrences()) == []
        assert backend.get_cues(["orphan1"]) == []
        assert [c for c, _ in nearest_cues(backend, b.embedding, 5)] == [a.id]
        assert backend.delete_orphan_cues() == 0

    def test_erase_deleted_drops_orphaned_cues_and_keeps_the_rest(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        a, b = build.cue("kept"), build.cue("zqxjorphan")
        self.store(backend, build.engram(1), [a, b])
        self.store(backend, build.engram(2), [a], [Association("e00002", "e00001", 0.9)])
        self.store(backend, build.engram(3), [a])
        backend.delete_engrams(["e00001"])
        assert backend.erase_deleted() == 1
        assert backend.get_cues(["zqxjorphan"]) == []
        assert sorted(e.id for e in backend.iter_engrams()) == ["e00002", "e00003"]
        assert [c.id for c in backend.iter_cues()] == [a.id]
        counts = backend.counts()
        assert (counts["links"], counts["associations"], counts["cooccurrences"]) == (2, 0, 0)
        assert backend.erase_deleted() == 0
        self.store(backend, build.engram(4), [a, build.cue("after")])  # still writable
        assert backend.count_engrams() == 3

    # -- listing, counting, stats ---------------------------------------------------------
    def test_list_page_by_last_access(self, backend: StorageBackend, build: GraphBuilder) -> None:
        t = T0 + timedelta(days=1)
        specs = [
            (1, t, 0),
            (2, t + timedelta(hours=1), 0),
            (3, t, 5),
            (4, t - timedelta(days=1), 0),
        ]
        for i, last, created in specs:
            created_at = T0 + timedelta(minutes=created)
            self.store(backend, build.engram(i, last_accessed_at=last, created_at=created_at))
        # e3 and e1 tie on last access: the newer created (e3) comes first.
        page = [e.id for e in backend.list_page(Listing(10))]
        assert page == ["e00002", "e00003", "e00001", "e00004"]
        assert [e.id for e in backend.list_page(Listing(2))] == ["e00002", "e00003"]
        assert backend.list_page(Listing(0)) == []

    def test_list_page_by_type_filters_before_limit(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        for i in range(12):
            kind = "semantic" if i < 2 else "episodic"
            self.store(backend, build.engram(i, memory_type=kind))
        got = backend.list_page(Listing(2, "semantic"))
        assert sorted(e.id for e in got) == ["e00000", "e00001"]
        assert all(e.memory_type == "semantic" for e in got)
        assert backend.list_page(Listing(5, "procedural")) == []

    def _listing_data(self, backend: StorageBackend, build: GraphBuilder) -> list[Engram]:
        engrams = []
        for i in range(30):
            # Three engrams share each last-access time and some share creation times
            # too, so only the id breaks every tie.
            e = build.engram(
                i,
                last_accessed_at=T0 + timedelta(hours=i // 3),
                created_at=T0 + timedelta(minutes=i // 2),
                tags=[f"t{i % 3}", *(["both"] if i % 5 == 0 else [])],
                cluster_id=i % 4,
                superseded_by=f"e{i + 1:05d}" if i % 7 == 0 else "",
                superseded_at=T0 + timedelta(days=1) if i % 7 == 0 else None,
            )
            self.store(backend, e)
            engrams.append(e)
        return engrams

    def test_list_page_filters_before_the_limit(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        engrams = self._listing_data(backend, build)
        listings = [
            Listing(4, tags=["t1"]),
            Listing(50, tags=["t1", "both"]),
            Listing(50, tags=["t0", "both"], all_tags=True),
            Listing(50, tags=["nope"]),
            Listing(3, since=T0 + timedelta(minutes=5)),
            Listing(50, until=T0 + timedelta(minutes=5)),
            Listing(50, since=T0 + timedelta(minutes=3), until=T0 + timedelta(minutes=9)),
            Listing(50, include_superseded=False),
            Listing(2, include_superseded=False, tags=["t0"]),
            Listing(50, cluster_id=2),
            Listing(50, memory_type="semantic", tags=["t2"], include_superseded=False),
        ]
        for listing in listings:
            got = [e.id for e in backend.list_page(listing)]
            want = [e.id for e in listing_sorted(engrams, listing)]
            assert got == want, f"{listing}: {got} != {want}"
        assert backend.list_page(Listing(0)) == []

    def test_list_page_pages_without_repeats_or_gaps(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        engrams = self._listing_data(backend, build)
        for listing in (Listing(4), Listing(3, tags=["t0", "t2"]), Listing(5, cluster_id=1)):
            seen: list[str] = []
            after = None
            while True:
                page = backend.list_page(
                    Listing(**{**_fields(listing), "after": after})  # type: ignore[arg-type]
                )
                if not page:
                    break
                assert len(page) <= listing.limit
                seen += [e.id for e in page]
                after = list_key(page[-1])
            want = listing_sorted(engrams, Listing(**{**_fields(listing), "limit": 1000}))
            assert seen == [e.id for e in want], listing

    def test_count_and_counts(self, backend: StorageBackend, build: GraphBuilder) -> None:
        assert backend.count_engrams() == 0
        assert backend.counts() == dict.fromkeys(
            ("engrams", "cues", "links", "associations", "cooccurrences"), 0
        )
        self.store(backend, build.engram(1), [build.cue("x"), build.cue("y")])
        self.store(backend, build.engram(2), [build.cue("x")], [Association("e00002", "e00001", 1)])
        assert backend.count_engrams() == 2
        assert backend.counts() == {
            "engrams": 2,
            "cues": 2,
            "links": 3,
            "associations": 1,
            "cooccurrences": 2,
        }

    def test_engram_stats(self, backend: StorageBackend, build: GraphBuilder) -> None:
        engrams = [build.engram(i, cluster_id=i) for i in range(5)]
        for e in engrams:
            self.store(backend, e)
        stats = {s.id: s for s in backend.engram_stats()}
        assert set(stats) == {e.id for e in engrams}
        for e in engrams:
            s = stats[e.id]
            assert s.importance == pytest.approx(e.importance, abs=1e-6)
            assert s.access_count == e.access_count
            assert s.decay_factor == pytest.approx(e.decay_factor, abs=1e-6)
            assert s.cluster_id == e.cluster_id
            _assert_same_time(s.last_accessed_at, e.last_accessed_at)

    # -- vector search ----------------------------------------------------------------------
    def _exact(self, engrams: list[Engram], query: np.ndarray, k: int) -> list[tuple[str, float]]:
        matrix = np.stack([unit(e.embedding) for e in engrams])  # type: ignore[arg-type]
        scores = matrix @ unit(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(engrams[i].id, float(scores[i])) for i in order]

    def test_vector_search_matches_exact_cosine(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        assert vector_hits(backend, build.vec(1), 5) == []
        engrams = [build.engram(i) for i in range(40)]
        for e in engrams:
            self.store(backend, e)
        for q in range(5):
            query = build.vec(500 + q) * 3.0  # an unnormalised query must work too
            got = vector_hits(backend, query, 10)
            want = self._exact(engrams, query, 10)
            assert [i for i, _ in got] == [i for i, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-4)
        assert len(vector_hits(backend, build.vec(7), 100)) == 40

    def test_vector_search_above_returns_the_top_k_at_or_over_the_floor(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        engrams = [build.engram(i) for i in range(40)]
        for e in engrams:
            self.store(backend, e)
        for q in range(5):
            query = build.vec(600 + q)
            want = self._exact(engrams, query, 40)
            floor = want[6][1] + 1e-3  # between the 7th and the 6th best
            for k in (4, 10):
                got = backend.vector_search_above(query, k, floor)
                assert [i for i, _ in got] == [i for i, s in want[:k] if s >= floor]
                sought = backend.seek(Seek(k=k, vector=query, vector_floor=floor)).vector
                assert [i for i, _ in sought] == [i for i, _ in got]
                assert len(got) == min(k, 6)
            assert backend.vector_search_above(query, 10, want[0][1] + 1e-3) == []

    def test_nearest_engrams_is_the_search_with_its_engrams(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        assert backend.nearest_engrams(build.vec(1), 10, -1.0) == []
        engrams = {e.id: e for e in (build.engram(i) for i in range(40))}
        for e in engrams.values():
            self.store(backend, e)
        # The fields the store's checks read, as updated after the write.
        when = T0 + timedelta(days=2)
        updates = [EngramUpdate(i, cluster_id=3, superseded_by="e00001", superseded_at=when)
                   for i in ("e00004", "e00017", "e00033")]  # fmt: skip
        backend.update_engrams(updates)
        for u in updates:
            engrams[u.id] = engrams[u.id].with_changes(
                cluster_id=3, superseded_by="e00001", superseded_at=when
            )
        for q in range(6):
            query = build.vec(700 + q)
            want = self._exact(list(engrams.values()), query, 40)
            floor = want[7][1] + 1e-3  # between the 8th and the 7th best
            for k in (5, 10):
                got = backend.nearest_engrams(query, k, floor)
                searched = backend.vector_search_above(query, k, floor)
                assert [(e.id, pytest.approx(s, abs=1e-6)) for e, s in got] == searched
                assert len(got) == min(k, 7)
                for e, _ in got:
                    expected = engrams[e.id]
                    # Embeddings may be left out; one that is sent must be right.
                    vector = expected.embedding if e.embedding is None else e.embedding
                    assert_engram_equal(e.with_changes(embedding=vector), expected)
            assert backend.nearest_engrams(query, 10, want[0][1] + 1e-3) == []

    def test_vector_search_filters_memory_type_before_k(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        query = build.vec(77)
        engrams = [build.engram(i, memory_type="episodic") for i in range(20)]
        far = build.engram(20, memory_type="procedural", embedding=unit(-query))
        for e in [*engrams, far]:
            self.store(backend, e)
        assert vector_hits(backend, query, 3, "procedural") == [
            (far.id, pytest.approx(-1.0, abs=1e-4))
        ]
        got = vector_hits(backend, query, 3, "episodic")
        assert [i for i, _ in got] == [i for i, _ in self._exact(engrams, query, 3)]

    def test_vector_search_above_index_threshold(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        n = self.indexed_engrams
        assert n > self.index_threshold
        engrams = self.load(backend, build, n)
        assert backend.ensure_indexes(self.dims, n + 1) == [], "below the threshold: no indexes"
        created = backend.ensure_indexes(self.dims, self.index_threshold)
        assert backend.ensure_indexes(self.dims, self.index_threshold) == [], (
            f"second ensure_indexes call created {created} again"
        )
        hits = 0
        for q in range(10):
            query = build.vec(900 + q)
            got = vector_hits(backend, query, 10)
            want = dict(self._exact(engrams, query, n))
            hits += len({i for i, _ in got} & set(list(want)[:10]))
            for i, score in got:
                assert score == pytest.approx(want[i], abs=1e-3), f"wrong cosine for {i}"
        assert hits / 100 >= 0.9, f"recall@10 {hits / 100:.2f} < 0.9 with indexes {created}"
        query = build.vec(950)
        near = backend.nearest_engrams(query, 10, -1.0)  # through the indexes too
        assert [(e.id, pytest.approx(s, abs=1e-6)) for e, s in near] == backend.vector_search_above(
            query, 10, -1.0
        )
        assert len(near) == 10
        fresh = build.engram(n + 1, embedding=build.vec(4242))
        self.store(backend, fresh)  # rows added after indexing must be found
        assert vector_hits(backend, build.vec(4242), 1)[0][0] == fresh.id

    def test_seek_finds_the_nearest_cues(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        assert nearest_cues(backend, build.vec(1), 3) == []
        cues = [build.cue(f"cue{i}") for i in range(12)]
        self.store(backend, build.engram(1), cues[:6])
        self.store(backend, build.engram(2), cues[6:])
        query = build.near(cues[4].embedding, seed=3, noise=0.05)  # type: ignore[arg-type]
        got = nearest_cues(backend, query, 3)
        assert len(got) == 3
        assert got[0][0] == cues[4].id
        assert got[0][1] == pytest.approx(float(unit(query) @ cues[4].embedding), abs=1e-4)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)

    def test_seek_cue_matches_carry_the_cue_type(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        person, word = build.cue("ada", cue_type="entity"), build.cue("engine")
        self.store(backend, build.engram(1), [person, word])
        by_name = backend.seek(Seek(k=1, cue_names=["ada", "engine"]))
        assert {(m.cue_id, m.cue_type) for m in by_name.cues} == {
            (person.id, "entity"),
            (word.id, "keyword"),
        }
        near = build.near(person.embedding, seed=5, noise=0.01)  # type: ignore[arg-type]
        by_vector = backend.seek(
            Seek(k=1, cue_vectors=np.stack([near]), cue_neighbours=1, cue_similarity=0.5)
        )
        assert [(m.cue_id, m.cue_type) for m in by_vector.cues] == [(person.id, "entity")]

    # -- text search -----------------------------------------------------------------------
    def test_text_search_covers_content_summary_tags(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        self.store(backend, build.engram(1, content="the zebra runs", summary="s", tags=[]))
        self.store(backend, build.engram(2, content="c", summary="a quokka smiled", tags=[]))
        self.store(backend, build.engram(3, content="c", summary="s", tags=["narwhal"]))
        self.store(backend, build.engram(4, content="nothing here", summary="s", tags=["x"]))
        for word, want in (("zebra", "e00001"), ("quokka", "e00002"), ("narwhal", "e00003")):
            got = text_hits(backend, word, 5)
            assert [i for i, _ in got] == [want], f"{word!r} -> {got}"
        assert text_hits(backend, "ZEBRA", 5)[0][0] == "e00001", "text search ignores case"
        got = text_hits(backend, "zebra quokka", 5)
        assert {i for i, _ in got} == {"e00001", "e00002"}
        assert text_hits(backend, "platypus", 5) == []

    def test_text_search_ranks_and_filters_before_k(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        for i in range(10):
            self.store(backend, build.engram(i, content=f"apple pie {i}", memory_type="episodic"))
        self.store(backend, build.engram(10, content="apple", memory_type="semantic"))
        self.store(backend, build.engram(11, content="apple apple orchard banana"))
        assert [i for i, _ in text_hits(backend, "apple", 3, "semantic")] == ["e00010"]
        got = text_hits(backend, "orchard apple", 3)
        assert got[0][0] == "e00011"
        assert len(got) == 3
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)

    @pytest.mark.parametrize("query", NASTY_QUERIES)
    def test_text_search_treats_syntax_as_plain_text(
        self, backend: StorageBackend, build: GraphBuilder, query: str
    ) -> None:
        self.store(backend, build.engram(1, content=f"needle {query} haystack", tags=[]))
        self.store(backend, build.engram(2, content="unrelated words", summary="", tags=[]))
        got = text_hits(backend, query, 5)
        assert isinstance(got, list)
        assert "e00002" not in [i for i, _ in got]
        assert backend.count_engrams() == 2
        assert [i for i, _ in text_hits(backend, f"{query} needle", 5)] == ["e00001"]

    # -- cues and links -------------------------------------------------------------------
    def test_seek_cue_members_are_bounded_by_importance(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        hub, rare = build.cue("hub"), build.cue("rare")
        for i in range(10):
            cues = [hub, rare] if i == 0 else [hub]
            self.store(backend, build.engram(i, importance=i / 10), cues)
        seeds = backend.seek(Seek(k=1, cue_names=["hub", "rare", "missing"], cue_fanout=3))
        got = {m.cue_id: m for m in seeds.cues}
        assert set(got) == {hub.id, rare.id}
        assert [e for e, _ in got[hub.id].engrams] == ["e00009", "e00008", "e00007"]
        assert all(s == pytest.approx(1.0) for _, s in got[hub.id].engrams)
        assert [e for e, _ in got[rare.id].engrams] == ["e00000"]
        assert got[hub.id].degree == 10 and got[rare.id].degree == 1
        assert got[hub.id].similarity == 1.0 and seeds.total == 10
        around = backend.neighbourhood(Expand(["e00000", "missing"], 0, 5, 3))
        assert around.degrees == {hub.id: 10, rare.id: 1}
        assert set(around.members) == {rare.id}, "a cue over cue_max_degree has no members"

    def test_get_cues_by_id(self, backend: StorageBackend, build: GraphBuilder) -> None:
        a, b = build.cue("alpha", cue_type="entity"), build.cue("beta")
        self.store(backend, build.engram(1), [a, b])
        stored = {c.name: c.id for c in backend.get_cues(["alpha", "beta"])}
        got = backend.get_cues_by_id([stored["alpha"], "missing", stored["beta"]])
        assert sorted((c.id, c.name, c.cue_type) for c in got) == sorted(
            [(stored["alpha"], "alpha", "entity"), (stored["beta"], "beta", "keyword")]
        )
        assert backend.get_cues_by_id([]) == []

    def test_cues_of(self, backend: StorageBackend, build: GraphBuilder) -> None:
        a, b = build.cue("a"), build.cue("b")
        self.store(backend, build.engram(1), [a, b])
        self.store(backend, build.engram(2), [b])
        self.store(backend, build.engram(3), [])
        got = sorted((lk.engram_id, lk.cue_id, lk.strength) for lk in links_of(backend, ["e00001"]))
        assert got == [("e00001", a.id, 1.0), ("e00001", b.id, 1.0)]
        assert links_of(backend, ["e00003", "missing"]) == []
        assert len(links_of(backend, ["e00001", "e00002"])) == 3

    def test_seek_answers_every_channel_at_once(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        apple, pear = build.cue("apple"), build.cue("pear")
        for i in range(12):
            content = "zebra crossing" if i == 3 else f"plain words {i}"
            self.store(backend, build.engram(i, content=content), [apple] if i % 2 else [pear])
        query = Seek(
            k=4,
            vector=build.vec(10_005),
            text="zebra",
            cue_names=["apple"],
            cue_vectors=np.asarray([pear.embedding]),
            cue_neighbours=1,
            cue_similarity=0.99,
        )
        seeds = backend.seek(query)
        assert seeds.vector == vector_hits(backend, build.vec(10_005), 4)
        assert seeds.vector[0][0] == "e00005"
        assert [i for i, _ in seeds.text] == ["e00003"]
        assert sorted((m.cue_id, m.degree) for m in seeds.cues) == [(apple.id, 6), (pear.id, 6)]
        assert {m.cue_id: m.similarity for m in seeds.cues}[pear.id] == pytest.approx(1.0, abs=1e-4)
        assert seeds.total == 12
        nothing = backend.seek(Seek(k=4))
        assert (nothing.vector, nothing.text, nothing.cues, nothing.total) == ([], [], [], 12)

    def test_seek_keeps_cues_over_the_similarity_and_the_best_match(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        cues = [build.cue(f"cue{i}") for i in range(8)]
        self.store(backend, build.engram(1), cues)
        near = build.near(cues[2].embedding, seed=4, noise=0.05)  # type: ignore[arg-type]
        rows = np.asarray([near, cues[2].embedding, build.vec(4321)])
        sim = float(unit(near) @ cues[2].embedding)
        query = Seek(k=1, cue_vectors=rows, cue_neighbours=2, cue_similarity=max(sim - 0.01, 0.5))
        found = {m.cue_id: m.similarity for m in backend.seek(query).cues}
        assert found.get(cues[2].id) == pytest.approx(1.0, abs=1e-4), "the best match counts"
        assert all(s >= query.cue_similarity for s in found.values())
        named = backend.seek(Seek(k=1, cue_names=["cue5"], cue_vectors=rows[:1], cue_neighbours=1))
        assert {m.cue_id: m.similarity for m in named.cues}[cues[5].id] == 1.0

    def test_seek_edge_cases(self, backend: StorageBackend, build: GraphBuilder) -> None:
        tie, solo = build.cue("tie"), build.cue("solo")
        for i in (4, 2, 3, 1):
            self.store(backend, build.engram(i, importance=0.5, memory_type="episodic"), [tie])
        self.store(backend, build.engram(9, memory_type="episodic"), [solo])
        both = Seek(k=3, cue_names=["tie"], cue_vectors=np.asarray([tie.embedding]),
                    cue_neighbours=2, cue_fanout=4)  # fmt: skip
        matches = [m for m in backend.seek(both).cues if m.cue_id == tie.id]
        assert len(matches) == 1 and matches[0].similarity == pytest.approx(1.0, abs=1e-4)
        assert [e for e, _ in matches[0].engrams] == ["e00001", "e00002", "e00003", "e00004"]
        [empty] = backend.seek(Seek(k=3, cue_names=["tie"], cue_fanout=0)).cues
        assert (empty.degree, empty.engrams) == (4, [])
        nobody = Seek(k=3, vector=build.vec(10_001), text="memory", memory_type="semantic")
        found = backend.seek(nobody)
        assert (found.vector, found.text, found.total) == ([], [], 5)
        around = backend.neighbourhood(Expand(["e00001"], 5, 10, 0))
        assert around.degrees == {tie.id: 4} and around.members.get(tie.id, []) == []

    def test_add_memory_again_is_a_retry_or_an_error(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        engram = build.engram(1)
        first = self.store(backend, engram, [build.cue("apple")])
        again = self.store(backend, engram, [build.cue("apple")])
        assert again.engram.id == first.engram.id
        assert backend.counts()["engrams"] == 1 and backend.counts()["links"] == 1
        with pytest.raises(BackendError):
            self.store(backend, engram.with_changes(content="something else entirely"))
        [kept] = backend.get_engrams([engram.id])
        assert kept.content == engram.content

    def test_neighbourhood_bounds_edges_per_direction(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        for i in range(1, 7):
            self.store(backend, build.engram(i))
        out = [Association("e00000", f"e0000{i}", s) for i, s in ((1, 0.5), (2, 0.9), (3, 0.7))]
        self.store(backend, build.engram(0), associations=out)
        for i, strength in ((4, 0.6), (5, 0.95), (6, 0.8)):
            backend.import_records([], [], [], [Association(f"e0000{i}", "e00000", strength)], [])
        got = edges_of(backend, ["e00000"], 2)
        pairs = sorted((a.source_id, a.target_id) for a in got)
        assert pairs == [("e00000", "e00002"), ("e00000", "e00003"),
                         ("e00005", "e00000"), ("e00006", "e00000")]  # fmt: skip
        assert edges_of(backend, ["e00000"], 0) == []

    def test_neighbourhood_members_are_the_most_important_first(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        common, own = build.cue("common"), build.cue("own")
        for i in range(6):
            self.store(backend, build.engram(i, importance=(i + 1) / 10), [common])
        self.store(backend, build.engram(9, importance=0.5), [common, own])
        around = backend.neighbourhood(Expand(["e00009"], 0, 10, 3))
        assert sorted((lk.engram_id, lk.cue_id) for lk in around.links) == [
            ("e00009", common.id), ("e00009", own.id)
        ]  # fmt: skip
        assert around.degrees == {common.id: 7, own.id: 1}
        assert [e for e, _ in around.members[common.id]] == ["e00005", "e00004", "e00009"]
        assert [e for e, _ in around.members[own.id]] == ["e00009"]
        assert backend.neighbourhood(Expand([], 5, 5, 5)) == Neighbourhood()

    # -- metadata -------------------------------------------------------------------------
    def test_meta_get_and_set(self, backend: StorageBackend) -> None:
        assert backend.get_meta("leiden.resolution") is None
        backend.set_meta("leiden.resolution", "1.25")
        backend.set_meta("embedding.model", "m\u00fcnchen 'quoted' \"x\"")
        backend.set_meta("leiden.resolution", "0.5")
        assert backend.get_meta("leiden.resolution") == "0.5"
        assert backend.get_meta("embedding.model") == "m\u00fcnchen 'quoted' \"x\""

    # -- import and streams -----------------------------------------------------------------
    def _graph(
        self, build: GraphBuilder
    ) -> tuple[list[Engram], list[Cue], list[Link], list[Association], list[CoOccurrence]]:
        engrams = [build.engram(i, cluster_id=i % 4) for i in range(25)]
        # A version chain travels with an export: e00003 corrected e00002.
        engrams[2] = engrams[2].with_changes(
            superseded_by="e00003", superseded_at=T0 + timedelta(hours=5, microseconds=7000)
        )
        engrams[3] = engrams[3].with_changes(supersedes="e00002")
        # Origins travel too: one of each kind, and a principal.
        engrams[4] = engrams[4].with_changes(origin="user", principal="key:alice")
        engrams[5] = engrams[5].with_changes(origin="agent")
        engrams[6] = engrams[6].with_changes(origin="import:smriti")
        engrams[7] = engrams[7].with_changes(origin="tool")
        cues = [build.cue(f"k{i}", cue_type="entity") for i in range(10)]
        links = [
            Link(e.id, cues[(i + j) % 10].id, 1.0) for i, e in enumerate(engrams) for j in (0, 3)
        ]
        assocs = [
            Association(engrams[i].id, engrams[(i + 1) % 25].id, 0.5 + i / 100, "semantic", T0)
            for i in range(25)
        ]
        cooc = [CoOccurrence(cues[i].id, cues[(i + 3) % 10].id, float(i + 1)) for i in range(10)]
        return engrams, cues, links, assocs, cooc

    def test_import_records_round_trips(self, backend: StorageBackend, build: GraphBuilder) -> None:
        engrams, cues, links, assocs, cooc = self._graph(build)
        backend.import_records(engrams[:10], cues, [], [], [])
        backend.import_records(engrams[10:], [], links, assocs, cooc)  # edges to earlier call
        got = list(backend.iter_engrams(batch_size=7))
        assert [e.id for e in got] == sorted(e.id for e in engrams)
        by_id = {e.id: e for e in engrams}
        for e in got:
            assert_engram_equal(e, by_id[e.id])
        got_cues = list(backend.iter_cues())
        assert [c.id for c in got_cues] == sorted(c.id for c in cues)
        for c in got_cues:
            want = next(x for x in cues if x.id == c.id)
            assert (c.name, c.cue_type) == (want.name, want.cue_type)
            np.testing.assert_allclose(c.embedding, want.embedding, atol=1e-5)
        assert sorted(backend.iter_links(), key=_link_key) == sorted(links, key=_link_key)
        got_assocs = {_edge_key(a): a for a in backend.iter_associations()}
        assert set(got_assocs) == {_edge_key(a) for a in assocs}
        for a in assocs:
            assert got_assocs[_edge_key(a)].strength == pytest.approx(a.strength)
        got_cooc = {(c.source_id, c.target_id): c.strength for c in backend.iter_cooccurrences()}
        assert got_cooc == {(c.source_id, c.target_id): pytest.approx(c.strength) for c in cooc}
        assert backend.counts() == {
            "engrams": 25,
            "cues": 10,
            "links": 50,
            "associations": 25,
            "cooccurrences": 10,
        }

    def test_import_records_replaces_existing_ids(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        engram = build.engram(1)
        backend.import_records([engram], [build.cue("z")], [], [], [])
        changed = engram.with_changes(content="replaced text", embedding=build.vec(31337))
        backend.import_records([changed], [], [], [], [])
        assert backend.count_engrams() == 1
        assert backend.seek(Seek(k=1)).total == 1
        [got] = backend.get_engrams([engram.id])
        assert_engram_equal(got, changed)
        assert vector_hits(backend, build.vec(31337), 1)[0][0] == engram.id
        assert text_hits(backend, "replaced", 3)[0][0] == engram.id

    def test_iter_engrams_ordered_by_id_in_batches(
        self, backend: StorageBackend, build: GraphBuilder
    ) -> None:
        ids = [f"id-{x}" for x in ("m", "b", "z", "a", "q")]
        for n, i in enumerate(ids):
            self.store(backend, build.engram(n, id=i), [build.cue(f"w{n}")])
        assert [e.id for e in backend.iter_engrams(batch_size=2)] == sorted(ids)
        assert [c.id for c in backend.iter_cues()] == sorted(f"c-w{n}" for n in range(5))
        assert all(e.embedding is not None for e in backend.iter_engrams(batch_size=1))

    # -- isolation, text edge cases, persistence -------------------------------------------------
    def test_tenant_isolation(self, backend_factory: Make, build: GraphBuilder) -> None:
        alice, bob = backend_factory("alice"), backend_factory("bob")
        e1 = build.engram(1, content="alice secret zebra")
        alice.add_memory(e1, [build.cue("apple"), build.cue("lonely")], [])
        alice.add_memory(
            build.engram(2), [build.cue("apple")], [Association("e00002", "e00001", 1)]
        )
        alice.add_memory(build.engram(3), [build.cue("orphan")], [])
        alice.delete_engrams(["e00003"])  # leaves alice an orphan cue bob must not delete
        alice.set_meta("k", "alice")
        bob.add_memory(build.engram(5), [build.cue("apple", seed=8)], [])
        assert bob.get_engrams(["e00001", "e00002"]) == []
        assert [e.id for e in bob.list_page(Listing(10))] == ["e00005"]
        assert bob.count_engrams() == 1 and bob.counts()["cues"] == 1
        assert [i for i, _ in vector_hits(bob, e1.embedding, 10)] == ["e00005"]
        assert text_hits(bob, "zebra", 10) == []
        assert [c.id for c in bob.get_cues(["apple", "lonely"])] == ["c-apple-8"]
        assert [c for c, _ in nearest_cues(bob, build.vec(1), 10)] == ["c-apple-8"]
        assert edges_of(bob, ["e00001", "e00002"], 10) == []
        assert links_of(bob, ["e00001"]) == [] and bob.get_meta("k") is None
        [apple] = bob.seek(Seek(k=10, cue_names=["apple", "lonely"])).cues
        assert (apple.cue_id, [e for e, _ in apple.engrams]) == ("c-apple-8", ["e00005"])
        assert bob.neighbourhood(Expand(["e00001", "e00002"], 10, 10, 10)) == Neighbourhood()
        assert bob.delete_engrams(["e00001", "e00002"]) == 0
        bob.update_engrams([EngramUpdate("e00001", access_count=99)])
        bob.delete_engrams(["e00005"])
        assert bob.delete_orphan_cues() == 1  # bob's apple only, not alice's orphan
        assert [e.id for e in alice.iter_engrams()] == ["e00001", "e00002"]
        assert alice.get_engrams(["e00001"])[0].access_count == e1.access_count
        assert alice.counts()["cues"] == 3 and alice.get_meta("k") == "alice"
        assert [c.id for c in alice.get_cues(["apple"])] == ["c-apple"]
        assert len(list(alice.iter_links())) == 3 and len(list(alice.iter_associations())) == 1
        assert list(bob.iter_engrams()) == [] and list(bob.iter_cooccurrences()) == []

    def test_unicode_round_trips(self, backend: StorageBackend, build: GraphBuilder) -> None:
        text = (
            "emoji \U0001f9e0\U0001f468\u200d\U0001f469 \u4e2d\u6587\u8bb0\u5fc6 "
            "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 caf\u00e9 \u00df"
        )
        engram = build.engram(
            1, content=text, summary="\u8bb0\u5fc6 summary", tags=["\u00e9t\u00e9", "\U0001f34e"]
        )
        cue = build.cue("\u00e4pfel \u8bb0")
        stored = self.store(backend, engram, [cue])
        [got] = backend.get_engrams([engram.id])
        assert_engram_equal(got, engram)
        assert stored.cues[0].name == cue.name
        assert [c.id for c in backend.get_cues([cue.name])] == [cue.id]
        assert text_hits(backend, "caf\u00e9", 3)[0][0] == engram.id

    def test_large_content_round_trips(self, backend: StorageBackend, build: GraphBuilder) -> None:
        chunk = "lorem ipsum dolor sit amet \u00e9 "
        content = (chunk * (self.large_content_bytes // len(chunk) + 1))[: self.large_content_bytes]
        engram = build.engram(1, content=content)
        self.store(backend, engram)
        [got] = backend.get_engrams([engram.id])
        assert len(got.content) == len(content) and got.content == content

    def test_reopen_keeps_data(self, backend: StorageBackend, build: GraphBuilder) -> None:
        cue = build.cue("persist")
        self.store(backend, build.engram(1), [cue, build.cue("other")])
        self.store(
            backend,
            build.engram(2, content="durable walrus"),
            [cue],
            [Association("e00002", "e00001", 0.9)],
        )
        backend.set_meta("schema.test", "1")
        before = backend.counts()
        again = self.reopen(backend)
        try:
            assert again.counts() == before
            assert_engram_equal(again.get_engrams(["e00001"])[0], build.engram(1))
            assert vector_hits(again, build.vec(10_001), 1)[0][0] == "e00001"
            assert text_hits(again, "walrus", 3)[0][0] == "e00002"
            assert again.get_meta("schema.test") == "1"
            assert [c.id for c in again.add_memory(build.engram(3), [cue], []).cues] == [cue.id]
        finally:
            again.close()

    def test_close_is_idempotent(self, backend_factory: Make) -> None:
        backend = backend_factory("carol")
        backend.close()
        backend.close()


def _fields(listing: Listing) -> dict[str, object]:
    return {f: getattr(listing, f) for f in Listing.__dataclass_fields__}


def _link_key(link: Link) -> tuple[str, str]:
    return (link.engram_id, link.cue_id)


class _Unconvertible:
    """An embedding that fails every conversion, to make add_memory fail mid-way."""

    def __array__(self, *args: object, **kwargs: object) -> Iterator[float]:
        raise RuntimeError("unconvertible embedding (deliberate test failure)")

    def __iter__(self) -> Iterator[float]:
        raise RuntimeError("unconvertible embedding (deliberate test failure)")

    def __len__(self) -> int:
        raise RuntimeError("unconvertible embedding (deliberate test failure)")

    def tolist(self) -> list[float]:
        raise RuntimeError("unconvertible embedding (deliberate test failure)")
