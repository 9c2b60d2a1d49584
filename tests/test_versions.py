"""Memory that stays true, in the engine: get, correct with history, update, related,
duplicates, conflicts, recall filters and list paging (on SMRITI_TEST_BACKEND)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from smriti.engine import Engine
from smriti.errors import InvalidInput, NotFound
from smriti.model import EngramUpdate, utcnow

from .conftest import EngineFactory


def test_get_returns_cues_associations_and_versions(engine: Engine) -> None:
    first = engine.store("Alice Smith leads the Kubernetes migration at Acme", tags="work")
    second = engine.store("Alice Smith presented the Kubernetes migration plan at Acme")
    got = engine.get(second.engram.id)
    assert got["memory"]["id"] == second.engram.id
    assert got["memory"]["superseded_by"] == "" and got["memory"]["superseded_at"] is None
    assert {"alice smith", "acme"} <= {c["name"] for c in got["cues"]}
    assert any(a["id"] == first.engram.id and a["direction"] == "out" for a in got["associations"])
    assert got["versions"] == [second.engram.id]
    back = engine.get(first.engram.id)
    assert any(a["id"] == second.engram.id and a["direction"] == "in" for a in back["associations"])


def test_correct_keeps_a_chain_of_three_versions(engine: Engine) -> None:
    v1 = engine.store("The team meeting is on Monday at 10", importance=0.7, tags="work").engram
    v2 = engine.correct(v1.id, "The team meeting is on Tuesday at 10")
    assert v2["superseded"] == v1.id
    v3 = engine.correct(v2["new_id"], "The team meeting is on Wednesday at 11", importance=0.9)
    chain = [v1.id, v2["new_id"], v3["new_id"]]
    for key in chain:
        assert [v["id"] for v in engine.history(key)["versions"]] == chain
        assert engine.get(key)["versions"] == chain
    old = engine.get(v1.id)["memory"]
    assert old["superseded_by"] == v2["new_id"] and old["superseded_at"]
    newest = engine.get(v3["new_id"])["memory"]
    assert newest["supersedes"] == v2["new_id"] and newest["importance"] == 0.9
    assert engine.get(v2["new_id"])["memory"]["tags"] == ["work"]  # inherited
    current = [r.engram.id for r in engine.recall("team meeting", limit=10)]
    assert current == [v3["new_id"]]
    every = [r.engram.id for r in engine.recall("team meeting", limit=10, include_superseded=True)]
    assert set(every) == set(chain)
    assert every[0] == v3["new_id"], "the newest version ranks first"
    listed = [r.engram.id for r in engine.recall(None, limit=10)]
    assert listed == [v3["new_id"]]


def test_correcting_a_superseded_memory_names_its_current_version(engine: Engine) -> None:
    v1 = engine.store("My phone number is 555 0100").engram
    v2 = engine.correct(v1.id, "My phone number is 555 0199")
    before = engine.stats()["engrams"]
    with pytest.raises(InvalidInput, match=v2["new_id"]):
        engine.correct(v1.id, "My phone number is 555 0142")
    assert engine.stats()["engrams"] == before


def test_correct_retry_with_the_same_new_id_stores_once(engine: Engine) -> None:
    v1 = engine.store("The backup runs at 2am").engram
    new_id = "0123456789abcdef0123456789abcdef"
    first = engine.correct(v1.id, "The backup runs at 3am", new_id=new_id)
    again = engine.correct(v1.id, "The backup runs at 3am", new_id=new_id)
    assert first["new_id"] == again["new_id"] == new_id
    assert engine.stats()["engrams"] == 2


def test_correction_carries_associations_over(engine: Engine) -> None:
    a = engine.store("Project Falcon uses PostgreSQL for billing data").engram
    b = engine.store("Project Falcon billing data lives in PostgreSQL clusters").engram
    linked = {x["id"] for x in engine.get(b.id)["associations"]}
    assert a.id in linked
    new = engine.correct(a.id, "Project Falcon moved billing data to CockroachDB")
    carried = {x["id"]: x for x in engine.get(new["new_id"])["associations"]}
    assert carried[a.id]["relation"] == "supersedes"
    assert b.id in carried, "the old version's association was carried over"


def test_unknown_and_foreign_ids_change_nothing(engine_factory: EngineFactory) -> None:
    alice, bob = engine_factory("alice"), engine_factory("bob")
    mine = alice.store("Alice keeps her keys in the blue bowl").engram
    for call in (
        lambda: bob.get(mine.id),
        lambda: bob.history(mine.id),
        lambda: bob.related(mine.id),
        lambda: bob.update(mine.id, importance=0.1),
        lambda: bob.correct(mine.id, "stolen"),
        lambda: alice.get("nope"),
        lambda: alice.correct("nope", "text"),
    ):
        with pytest.raises(NotFound):
            call()
    assert alice.get(mine.id)["memory"]["importance"] == 0.5
    assert bob.stats()["engrams"] == 0 and alice.stats()["engrams"] == 1
    with pytest.raises(InvalidInput, match="importance and/or tags"):
        alice.update(mine.id)
    with pytest.raises(InvalidInput, match="memory_id is required"):
        alice.get("  ")


def test_update_changes_importance_and_tags_in_place(engine: Engine) -> None:
    e = engine.store("Quarterly report is due Friday", tags="work").engram
    out = engine.update(e.id, importance=0.95, tags="finance, urgent")
    assert out["memory"]["importance"] == 0.95 and out["memory"]["tags"] == ["finance", "urgent"]
    got = engine.get(e.id)["memory"]
    assert got["tags"] == ["finance", "urgent"] and got["importance"] == 0.95
    assert engine.stats()["engrams"] == 1
    assert [r.engram.id for r in engine.recall(None, tags="urgent")] == [e.id]
    assert list(engine.recall(None, tags="work")) == []


def test_related_lists_associations_shared_cues_and_versions(engine: Engine) -> None:
    a = engine.store("Grace Hopper wrote the first COBOL compiler").engram
    b = engine.store("Grace Hopper popularised the term debugging").engram
    engine.store("Bananas are rich in potassium")
    new = engine.correct(b.id, "Grace Hopper popularised the word bug for computer faults")
    got = engine.related(a.id)
    relations = {r["id"]: r for r in got["related"]}
    assert b.id in relations or new["new_id"] in relations
    shared = [r for r in got["related"] if r["relation"] == "shared_cue"]
    assert all(r["via"] for r in shared)
    versions = {r["id"]: r["relation"] for r in engine.related(b.id)["related"]}
    assert versions[new["new_id"]] == "superseded_by"
    assert {r["id"]: r["relation"] for r in engine.related(new["new_id"])["related"]}[
        b.id
    ] == "supersedes"
    assert len(engine.related(a.id, limit=1)["related"]) <= 1


def test_only_a_repeat_is_merged(engine: Engine) -> None:
    first = engine.store("I prefer dark mode in my editor", tags="ui")
    again = engine.store("  i PREFER dark-mode, in my editor. ", importance=0.8, tags="editor")
    assert again.deduplicated and again.engram.id == first.engram.id
    assert again.to_dict()["deduplicated"] is True
    got = engine.get(first.engram.id)["memory"]
    assert got["access_count"] == 1 and got["importance"] == 0.8
    assert got["tags"] == ["ui", "editor"]
    assert engine.stats()["engrams"] == 1
    # Every pair differs in one detail: each is a fact of its own, and both are kept.
    pairs = [
        ("We chose option A for the launch", "We chose option B for the launch"),
        ("take vitamin D daily", "take vitamin C daily"),
        ("the meeting moved to building A", "the meeting moved to building B"),
        ("The project deadline is March 5", "The project deadline is March 12"),
        ("Alice paid Bob 20 euros", "Bob paid Alice 20 euros"),
        ("I like strong coffee", "I don't like strong coffee"),
        ("The cabin faces north", "The cabin faces south"),
        ("The price is 3.5 euros", "The price is 35 euros"),
        ("The freezer is at -18 degrees", "The freezer is at 18 degrees"),
    ]
    for one, two in pairs:
        kept = engine.store(one).engram
        second = engine.store(two)
        assert not second.deduplicated and second.engram.id != kept.id, (one, two)
        assert engine.get(second.engram.id)["memory"]["content"] == two
    assert engine.stats()["engrams"] == 1 + 2 * len(pairs)


def test_a_near_duplicate_is_stored_linked_and_reported(engine_factory: EngineFactory) -> None:
    engine = engine_factory(DEDUP_THRESHOLD="0.8")
    first = engine.store("We chose option A for the product launch in spring").engram
    second = engine.store("We chose option B for the product launch in spring")
    assert not second.deduplicated
    near = second.to_dict()["near_duplicates"]
    assert [n["id"] for n in near] == [first.id]
    assert near[0]["similarity"] >= 0.8  # 1.0 here: the lexical embedder drops "A" and "B"
    links = engine.get(second.engram.id)["associations"]
    assert {(a["id"], a["relation"]) for a in links} >= {(first.id, "near_duplicate")}
    unrelated = engine.store("Bananas are yellow when ripe")
    assert unrelated.to_dict()["near_duplicates"] == []


def test_a_client_retry_stores_once(engine: Engine) -> None:
    first = engine.store("Lunch with Dana on Friday", memory_id="0123456789abcdef0123456789abcdef")
    again = engine.store("Lunch with Dana on Friday", memory_id="0123456789abcdef0123456789abcdef")
    assert again.engram.id == first.engram.id == "0123456789abcdef0123456789abcdef"
    assert engine.store("Lunch with Dana on Friday").deduplicated
    assert engine.stats()["engrams"] == 1


def test_dedup_can_be_turned_off(engine_factory: EngineFactory) -> None:
    engine = engine_factory(DEDUP_THRESHOLD="off")
    engine.store("Water boils at 100 degrees")
    assert not engine.store("Water boils at 100 degrees").deduplicated
    assert engine.stats()["engrams"] == 2


def test_conflict_is_reported_and_the_newer_ranks_first(engine: Engine) -> None:
    # Everything but the conflict favours the old memory: importance, and recalls.
    paris = engine.store("I live in Paris", importance=1.0).engram
    for _ in range(5):
        engine.recall("where do I live")
    berlin = engine.store("I now live in Berlin, I left Paris", importance=0.1)
    conflicts = berlin.to_dict()["possible_conflicts"]
    assert [c["id"] for c in conflicts] == [paris.id]
    assert not berlin.deduplicated
    ranked = [r.engram.id for r in engine.recall("where do I live", limit=5)]
    assert ranked.index(berlin.engram.id) < ranked.index(paris.id)
    unrelated = engine.store("Bananas are yellow")
    assert unrelated.to_dict()["possible_conflicts"] == []


def test_filters_apply_before_the_limit(engine: Engine) -> None:
    for i in range(30):
        engine.store(f"note {i} about the garden and tomatoes", tags="garden")
    rare = engine.store("tomatoes need deep watering in summer", tags="rare, garden").engram
    for mode in ("recall", "search", "list"):
        got = engine.recall("tomatoes", mode=mode, tags="rare", limit=3)
        assert [r.engram.id for r in got] == [rare.id], mode
    both = engine.recall("tomatoes", tags="rare, garden", tag_match="all", limit=50)
    assert [r.engram.id for r in both] == [rare.id]
    anyof = engine.recall(None, tags="rare, garden", limit=50)
    assert len(anyof) == 31
    future = (utcnow() + timedelta(days=1)).isoformat()
    assert list(engine.recall("tomatoes", since=future)) == []
    assert len(engine.recall(None, until=future, limit=50)) == 31
    assert len(engine.recall(None, since="2000-01-01", limit=4, memory_type="semantic")) <= 4
    with pytest.raises(InvalidInput, match="since must be an ISO 8601"):
        engine.recall("x", since="last tuesday")
    with pytest.raises(InvalidInput, match="before until"):
        engine.recall("x", since="2026-02-01", until="2026-01-01")
    with pytest.raises(InvalidInput, match="tag_match"):
        engine.recall("x", tag_match="some")


def test_list_pages_with_a_cursor_without_repeats_or_gaps(
    engine_factory: EngineFactory,
) -> None:
    engine = engine_factory()
    ids = {engine.store(f"memory number {i} on paging").engram.id for i in range(45)}
    # Several memories share an access time, as after a bulk import.
    same = utcnow()
    engine.backend.update_engrams(
        [EngramUpdate(i, last_accessed_at=same) for i in sorted(ids)[:20]]
    )
    seen: list[str] = []
    cursor = None
    while True:
        page = engine.recall(None, limit=7, cursor=cursor)
        seen += [r.engram.id for r in page]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 45 and set(seen) == ids
    first = engine.recall(None, limit=7)
    with pytest.raises(InvalidInput, match="other filters"):
        engine.recall(None, limit=7, cursor=first.next_cursor, tags="x")
    with pytest.raises(InvalidInput, match="cursor is not valid"):
        engine.recall(None, cursor="not-a-cursor")
    with pytest.raises(InvalidInput, match="another user"):
        engine_factory("bob").recall(None, cursor=first.next_cursor)
    with pytest.raises(InvalidInput, match="cursor pages a list"):
        engine.recall("paging", cursor=first.next_cursor)


def test_one_cue_of_a_three_cue_query_is_weak_evidence() -> None:
    from smriti.backend import CueMatch, Seeds
    from smriti.engine.recall import cue_hits

    # "message" is the only query cue stored, on a memory about commit messages; the
    # other two query cues ("broker", "pick") match nothing.
    seeds = Seeds(cues=[CueMatch("c-message", 1.0, 3, [("commits", 1.0)])], total=100)
    alone = cue_hits(seeds)["commits"]
    assert alone == 1.0  # relative to the matched cues only, as before
    weak = cue_hits(seeds, asked=3)["commits"]
    assert weak < 0.6
    full = Seeds(
        cues=[
            CueMatch("c-message", 1.0, 3, [("kafka", 1.0), ("commits", 1.0)]),
            CueMatch("c-broker", 1.0, 1, [("kafka", 1.0)]),
            CueMatch("c-pick", 1.0, 2, [("kafka", 1.0)]),
        ],
        total=100,
    )
    scores = cue_hits(full, asked=3)
    assert scores["kafka"] == 1.0 and scores["commits"] < 0.6
