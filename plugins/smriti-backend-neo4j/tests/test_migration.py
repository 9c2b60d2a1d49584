"""A database written by an older version (or the reference server) opens and is migrated."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import neo4j
import numpy as np
from smriti_backend_neo4j.backend import SCHEMA_VERSION, Neo4jBackend

from smriti.backend import EngramUpdate, Listing, Seek
from smriti.testing import T0, GraphBuilder
from smriti.testing.storage_suite import assert_engram_equal

from .conftest import ServerInfo

build = GraphBuilder(4)


def test_old_nodes_are_migrated_and_readable(
    neo4j_server: ServerInfo, make_backend: Callable[..., Neo4jBackend]
) -> None:
    vector = [0.5, 0.5, 0.5, 0.5]
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    with neo4j.GraphDatabase.driver(
        neo4j_server.uri, auth=(neo4j_server.username, neo4j_server.password)
    ) as driver:
        driver.execute_query(
            "CREATE (:Engram {user: 'olduser', id: 'old1', content: 'legacy walrus note', "
            "summary: 's', memory_type: 'semantic', importance: 0.4, access_count: 2, "
            "created_at: $when, last_accessed_at: $when, decay_factor: 0.9, "
            "embedding: $vector, source: '', tags: ['vintage']})"
            # Edges as older versions wrote them: no keys (v2 and v3 add them).
            "-[:EncodedBy {strength: 1.0}]->(:Cue {user: 'olduser', id: 'c1', name: 'Walrus', "
            "key: 'walrus', cue_type: 'keyword'})-[:CoOccurs {strength: 2.0}]->"
            "(:Cue {user: 'olduser', id: 'c2', name: 'Tusk', key: 'tusk', cue_type: 'keyword'})",
            when=when,
            vector=vector,
        )
    backend = make_backend("olduser")
    [engram] = backend.get_engrams(["old1"])
    assert engram.cluster_id == -1 and engram.tags == ["vintage"]
    assert (engram.supersedes, engram.superseded_by, engram.superseded_at) == ("", "", None)
    assert engram.created_at == when
    np.testing.assert_allclose(engram.embedding, vector)
    assert [i for i, _ in backend.seek(Seek(k=3, text="vintage")).text] == ["old1"]
    assert [i for i, _ in backend.seek(Seek(k=3, text="walrus")).text] == ["old1"]
    assert backend.seek(Seek(k=1, vector=np.array(vector))).vector[0][0] == "old1"
    assert backend.get_meta("neo4j.schema_version") == str(SCHEMA_VERSION)
    [cue] = backend.seek(Seek(k=1, cue_names=["walrus"])).cues
    assert cue.degree == 1 and cue.engrams == [("old1", 1.0)]  # found through the rank index
    backend.add_memory(build.engram(1), [build.cue("tusk"), build.cue("walrus")], [])
    strengths = {(c.source_id, c.target_id): c.strength for c in backend.iter_cooccurrences()}
    assert strengths == {("c1", "c2"): 3.0, ("c2", "c1"): 1.0}  # the old edge, found by key
    again = make_backend("olduser")  # a second open does not migrate again
    assert again.get_engrams(["old1"])[0].cluster_id == -1


def _query(info: ServerInfo, statement: str, **params: Any) -> list[Any]:
    with neo4j.GraphDatabase.driver(info.uri, auth=(info.username, info.password)) as driver:
        return list(driver.execute_query(statement, params).records)


VERSION_FIELDS = (
    "MATCH (e:Engram {user: 'v3user'}) "
    "RETURN e.id AS id, [e.supersedes, e.superseded_by, e.superseded_at] AS fields ORDER BY id"
)


def test_a_store_without_version_fields_is_migrated(
    neo4j_server: ServerInfo, make_backend: Callable[..., Neo4jBackend]
) -> None:
    old, fixed = build.engram(1), build.engram(2, supersedes="e00009")
    writer = make_backend("v3user")
    writer.import_records([old, fixed], [], [], [], [])
    writer.close()
    # As schema version 3 left them: no supersedes, superseded_by or superseded_at (the
    # correction's supersedes is kept to show that the migration keeps what is there).
    _query(neo4j_server, "MATCH (e:Engram {user: 'v3user'}) "
           "REMOVE e.superseded_by, e.superseded_at")  # fmt: skip
    _query(neo4j_server, "MATCH (e:Engram {user: 'v3user', id: 'e00001'}) REMOVE e.supersedes")
    _query(neo4j_server, "MATCH (m:SmritiMeta {user: 'v3user', key: 'neo4j.schema_version'}) "
           "SET m.value = '3'")  # fmt: skip

    backend = make_backend("v3user")
    assert backend.get_meta("neo4j.schema_version") == str(SCHEMA_VERSION)
    stored = {r["id"]: r["fields"] for r in _query(neo4j_server, VERSION_FIELDS)}
    assert stored == {"e00001": ["", "", None], "e00002": ["e00009", "", None]}
    got = {e.id: e for e in backend.get_engrams([old.id, fixed.id])}
    assert_engram_equal(got[old.id], old)
    assert_engram_equal(got[fixed.id], fixed)
    current = Listing(5, include_superseded=False)
    assert [e.id for e in backend.list_page(current)] == [fixed.id, old.id]

    # Nodes written without the fields by another tool after the migration read the same.
    _query(neo4j_server, "MATCH (e:Engram {user: 'v3user'}) REMOVE e.supersedes, e.superseded_by")
    assert_engram_equal(backend.get_engrams([old.id])[0], old)
    assert [e.id for e in backend.list_page(current)] == [fixed.id, old.id]
    assert [e.supersedes for e in backend.iter_engrams()] == ["", ""]

    when = T0 + timedelta(days=2, microseconds=5)
    backend.update_engrams([EngramUpdate(old.id, superseded_by=fixed.id, superseded_at=when)])
    assert [e.id for e in backend.list_page(current)] == [fixed.id]
    want = old.with_changes(superseded_by=fixed.id, superseded_at=when)
    assert_engram_equal(backend.get_engrams([old.id])[0], want)


ORIGIN_FIELDS = (
    "MATCH (e:Engram {user: 'v4user'}) RETURN e.id AS id, [e.origin, e.principal] AS fields "
    "ORDER BY id"
)


def test_a_store_without_origins_is_migrated_and_reads_them_as_unknown(
    neo4j_server: ServerInfo, make_backend: Callable[..., Neo4jBackend]
) -> None:
    old, said = build.engram(1), build.engram(2, origin="user", principal="key:k1")
    writer = make_backend("v4user")
    writer.import_records([old, said], [], [], [], [])
    writer.close()
    # As schema version 4 left them: no origin or principal (the second node's are kept
    # to show that the migration keeps what is there).
    _query(neo4j_server, "MATCH (e:Engram {user: 'v4user', id: 'e00001'}) "
           "REMOVE e.origin, e.principal")  # fmt: skip
    _query(neo4j_server, "MATCH (m:SmritiMeta {user: 'v4user', key: 'neo4j.schema_version'}) "
           "SET m.value = '4'")  # fmt: skip

    backend = make_backend("v4user")
    assert backend.get_meta("neo4j.schema_version") == str(SCHEMA_VERSION)
    stored = {r["id"]: r["fields"] for r in _query(neo4j_server, ORIGIN_FIELDS)}
    assert stored == {"e00001": ["", ""], "e00002": ["user", "key:k1"]}
    got = {e.id: e for e in backend.get_engrams([old.id, said.id])}
    assert_engram_equal(got[old.id], old)
    assert_engram_equal(got[said.id], said)
    assert [e.id for e in backend.list_page(Listing(5, origin="user"))] == [said.id]
    # Nodes written without them by another tool read as unknown, and pass no filter.
    _query(neo4j_server, "MATCH (e:Engram {user: 'v4user'}) REMOVE e.origin")
    assert [e.origin for e in backend.iter_engrams()] == ["", ""]
    assert backend.list_page(Listing(5, origin="user")) == []
