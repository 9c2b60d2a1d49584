"""``memory_details``: one memory in full on a real store (issue 41), what the
``memory://`` resource and the web page show."""

from __future__ import annotations

from typing import Any

import pytest

from smriti.engine import Engine
from smriti.engine.details import CLUSTER_MEMBERS, memory_details
from smriti.errors import InvalidInput, NotFound
from smriti.model import EngramUpdate
from smriti.owner.ops import run
from smriti.requests import DetailsRequest, decode

from .conftest import EngineFactory

PASTA = "Alice's favourite pasta is carbonara with guanciale from Rome"


def test_a_memory_in_full(engine: Engine) -> None:
    first = engine.store(PASTA, tags=["food"]).engram.id
    echo = engine.store(PASTA.replace("Rome", "Roma")).engram.id  # linked to the first
    later = engine.store("Alice cooks carbonara with guanciale every Friday").engram.id
    fixed = engine.correct(first, "Alice's favourite pasta is cacio e pepe")["new_id"]
    shown = memory_details(engine, fixed)
    memory = shown["memory"]
    assert memory["id"] == fixed and memory["content"].endswith("cacio e pepe")
    assert memory["tags"] == ["food"] and memory["origin"] == "agent"
    assert {"created_at", "last_accessed_at", "decay_factor", "access_count"} <= set(memory)
    assert {c["name"] for c in shown["cues"]} >= {"cacio", "pepe", "pasta"}
    versions = shown["versions"]
    assert [v["id"] for v in versions] == [first, fixed]
    assert [v["current"] for v in versions] == [False, True]
    assert versions[0]["superseded_at"] and versions[1]["superseded_at"] is None
    assert _links(shown) >= {(first, "out", "supersedes"), (echo, "out", "semantic")}
    assert shown["merged"] == [] and shown["cluster"] is None
    both_ways = {(first, "out", "semantic"), (later, "in", "follows"), (fixed, "in", "semantic")}
    assert _links(memory_details(engine, echo)) >= both_ways


def _links(shown: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(a["id"], a["direction"], a["relation"]) for a in shown["associations"]}


def test_merged_memories_and_the_cluster_are_shown(engine: Engine) -> None:
    ids = [
        engine.store(f"Bob's bike number {i} is parked at gate {i}").engram.id for i in range(14)
    ]
    engine.backend.update_engrams([EngramUpdate(i, cluster_id=7) for i in ids])
    engine.merge(ids[0], [ids[1]])
    shown = memory_details(engine, ids[0])
    assert [m["id"] for m in shown["merged"]] == [ids[1]]
    assert shown["merged"][0]["merged_at"]
    cluster = shown["cluster"]
    assert cluster["id"] == 7 and cluster["label"].startswith("cluster 7")
    members = [m["id"] for m in cluster["members"]]
    assert len(members) == CLUSTER_MEMBERS and cluster["more"] is True
    assert ids[0] not in members and ids[1] not in members  # itself, and the merged one
    assert set(members) <= set(ids[2:])


def test_unknown_and_other_users_ids_are_not_found(engine_factory: EngineFactory) -> None:
    alice, bob = engine_factory("alice"), engine_factory("bob")
    hers = alice.store(PASTA).engram.id
    with pytest.raises(NotFound, match="for user 'bob'") as caught:
        memory_details(bob, hers)
    assert "carbonara" not in str(caught.value)
    with pytest.raises(NotFound):
        memory_details(alice, "0" * 32)
    with pytest.raises(InvalidInput, match="memory_id is required"):
        memory_details(alice, " ")


def test_the_details_request_travels_as_the_owner_reads_it(engine: Engine) -> None:
    key = engine.store(PASTA).engram.id
    request = DetailsRequest.parse(f" {key} ")
    assert decode("details", request.to_wire(), engine.settings) == request
    assert run(engine, request) == memory_details(engine, key)
    with pytest.raises(InvalidInput, match="give the id of the memory to show"):
        DetailsRequest.parse("")
