"""``list_page`` on FalkorDB: the values recall and consolidation move to an engram's
``Usage`` loop (last access, cluster) filter and page like the node's own, users of one
graph never see each other's engrams, and the page key is exact to the microsecond."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from smriti_backend_falkor.backend import FalkorBackend

from smriti.backend import Engram, EngramUpdate, Listing, list_key, listing_sorted
from smriti.testing import T0, GraphBuilder

build = GraphBuilder(8)


def pages(backend: FalkorBackend, listing: Listing) -> list[str]:
    """Every id of ``listing``, a page at a time, each page after the last one's key."""
    seen: list[str] = []
    after = None
    while page := backend.list_page(replace(listing, after=after)):
        assert len(page) <= listing.limit
        seen += [e.id for e in page]
        after = list_key(page[-1])
    return seen


def stored_and_moved(backend: FalkorBackend) -> list[Engram]:
    """20 engrams, half of them then accessed and re-clustered by update_engrams, with
    access times one microsecond apart and ties broken only by the id."""
    engrams = [build.engram(i, cluster_id=0) for i in range(20)]
    backend.import_records(engrams[:10], [], [], [], [])
    for e in engrams[10:]:
        backend.add_memory(e, [], [])
    moved = []
    for i, e in enumerate(engrams):
        if i % 2:
            when = T0 + timedelta(days=1, microseconds=i // 4)
            moved.append(e.with_changes(last_accessed_at=when, cluster_id=1 + i % 3))
        else:
            moved.append(e)
    backend.update_engrams(
        [
            EngramUpdate(e.id, last_accessed_at=e.last_accessed_at, cluster_id=e.cluster_id)
            for e, before in zip(moved, engrams, strict=True)
            if e is not before
        ]
    )
    return moved


def test_usage_loop_values_filter_and_page(make_backend: Callable[..., FalkorBackend]) -> None:
    backend = make_backend("alice")
    engrams = stored_and_moved(backend)
    for listing in (
        Listing(3),
        Listing(2, cluster_id=1),
        Listing(4, cluster_id=0),
        Listing(3, tags=["tag1"], cluster_id=2),
        Listing(1, memory_type="semantic"),
    ):
        want = [
            e.id
            for e in listing_sorted(
                engrams,
                Listing(100, listing.memory_type, listing.tags, cluster_id=listing.cluster_id),
            )
        ]
        assert pages(backend, listing) == want, listing
        first = [e.id for e in backend.list_page(listing)]
        assert first == want[: listing.limit], listing


def test_tenant_users_list_only_their_own(make_backend: Callable[..., FalkorBackend]) -> None:
    alice, bob = make_backend("alice"), make_backend("bob")
    mine = stored_and_moved(alice)
    bob.import_records([build.engram(i, tags=["tag1"]) for i in range(30, 40)], [], [], [], [])
    assert [e.id for e in alice.list_page(Listing(100, tags=["tag1"]))] == [
        e.id for e in listing_sorted(mine, Listing(100, tags=["tag1"]))
    ]
    assert {e.id for e in bob.list_page(Listing(100))} == {f"e{i:05d}" for i in range(30, 40)}
    assert bob.list_page(Listing(100, cluster_id=1)) == []


def test_superseding_hides_from_current_listing_only(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    backend = make_backend("alice", "graph")
    engrams = stored_and_moved(backend)
    when = T0 + timedelta(days=3, microseconds=5)
    backend.update_engrams(
        [EngramUpdate(e.id, superseded_by="e00099", superseded_at=when) for e in engrams[:5]]
    )
    current = pages(backend, Listing(4, include_superseded=False))
    assert current == [e.id for e in listing_sorted(engrams[5:], Listing(100))]
    assert len(pages(backend, Listing(4))) == 20
    [old] = backend.get_engrams([engrams[0].id])
    assert (old.superseded_by, old.superseded_at) == ("e00099", when)
