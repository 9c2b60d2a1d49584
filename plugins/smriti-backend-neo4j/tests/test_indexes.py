"""Vector indexes that already exist under other names (another tool, the reference server)."""

from __future__ import annotations

from collections.abc import Callable

import neo4j
import pytest
from smriti_backend_neo4j.backend import Neo4jBackend
from smriti_backend_neo4j.cypher import ENGRAM_TEXT_INDEX

from smriti.backend import Seek
from smriti.testing import GraphBuilder

from .conftest import ServerInfo

DIMS = 8


def _foreign_index(info: ServerInfo, dims: int, function: str) -> None:
    with neo4j.GraphDatabase.driver(info.uri, auth=(info.username, info.password)) as driver:
        driver.execute_query(
            "CREATE VECTOR INDEX legacy_engram_vec FOR (e:Engram) ON e.embedding OPTIONS "
            "{indexConfig: {`vector.dimensions`: $dims, `vector.similarity_function`: $fn}}",
            dims=dims,
            fn=function,
        )
        driver.execute_query("CALL db.awaitIndexes(120)")


@pytest.mark.parametrize(
    ("dims", "function", "used"),
    [(DIMS, "cosine", True), (DIMS + 1, "cosine", False), (DIMS, "euclidean", False)],
)
def test_existing_index_on_engram_embedding_is_used_only_if_it_fits(
    neo4j_server: ServerInfo,
    make_backend: Callable[..., Neo4jBackend],
    dims: int,
    function: str,
    used: bool,
) -> None:
    _foreign_index(neo4j_server, dims, function)
    build = GraphBuilder(DIMS)
    backend = make_backend("alice")
    engrams = [build.engram(i) for i in range(80)]
    backend.import_records(engrams, [], [], [], [])
    assert backend.ensure_indexes(DIMS, 50) == ["smriti_cue_embedding"]
    index = backend._vector_indexes.get("Engram")
    assert (index is not None and index.dims == DIMS) is used
    query = build.vec(10_007)
    [(best, score)] = backend.seek(Seek(k=1, vector=query)).vector
    assert best == "e00007" and score == pytest.approx(1.0, abs=1e-4)


def test_text_index_is_eventually_consistent_yet_a_store_is_found_by_text_at_once(
    make_backend: Callable[..., Neo4jBackend],
) -> None:
    """The full-text index does not hold up commits; the backend that wrote a memory
    waits for the index before its next text read, so it finds the memory at once."""
    backend = make_backend("tess")
    (record,) = backend._run(
        "SHOW FULLTEXT INDEXES YIELD name, options WHERE name = $name RETURN options",
        name=ENGRAM_TEXT_INDEX,
    )
    assert record["options"]["indexConfig"]["fulltext.eventually_consistent"] is True
    build = GraphBuilder(DIMS)
    for i in range(1, 6):
        backend.add_memory(build.engram(i, content=f"quince word{i}"), [], [])
        found = backend.seek(Seek(k=10, text=f"word{i}")).text
        assert [engram_id for engram_id, _ in found] == [build.engram(i).id]
    backend.delete_engrams([build.engram(5).id])
    assert backend.seek(Seek(k=10, text="word5")).text == []
