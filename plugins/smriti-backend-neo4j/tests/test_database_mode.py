"""``NEO4J_ISOLATION=database``: safe per-user names, routing, and the Community error."""

from __future__ import annotations

import re
from collections.abc import Callable

import neo4j
import pytest
from smriti_backend_neo4j.backend import Neo4jBackend
from smriti_backend_neo4j.naming import database_name_for

from smriti.config import Settings
from smriti.errors import BackendError
from smriti.testing import GraphBuilder

from .conftest import ServerInfo

VALID = re.compile(r"^[a-z][a-z0-9.-]{2,62}$")


@pytest.mark.parametrize(
    ("user", "want"),
    [
        ("alice", "smriti-alice"),
        ("bob-2", "smriti-bob-2"),
        ("a.b", "smriti-a.b"),
        ("9lives", "smriti-9lives"),
    ],
)
def test_plain_names_are_kept(user: str, want: str) -> None:
    assert database_name_for(user) == want


@pytest.mark.parametrize("user", ["Alice", "bob_smith", "x" * 64, "Ünïcode", "a__b"])
def test_mangled_names_are_valid_and_hashed(user: str) -> None:
    name = database_name_for(user)
    assert VALID.fullmatch(name), name
    assert name.startswith("smriti-")
    assert re.search(r"-[0-9a-f]{10}$", name), "a changed name carries a hash of the original"


def test_names_never_collide_for_distinct_users() -> None:
    users = ["alice", "Alice", "ALICE", "alice_", "alice-", "a_b", "a-b", "a.b", "x" * 64, "x" * 63]
    names = [database_name_for(u) for u in users]
    assert len(set(names)) == len(users)


def test_from_settings_routes_to_the_users_database() -> None:
    settings = Settings.from_env({"NEO4J_ISOLATION": "database", "NEO4J_PASSWORD": "pw"})
    backend = Neo4jBackend.from_settings(settings, "Bob_Smith")
    assert backend.database == database_name_for("Bob_Smith")
    assert backend.multi_tenant is False
    tenant = Neo4jBackend.from_settings(Settings.from_env({}), "Bob_Smith")
    assert tenant.database == "neo4j" and tenant.multi_tenant is True


def test_community_edition_refuses_with_a_clear_error(neo4j_server: ServerInfo) -> None:
    backend = neo4j_server.backend("erin", isolation="database")
    with pytest.raises(BackendError) as caught:
        backend.open()
    message = str(caught.value)
    assert "Enterprise" in message and "Community" in message
    assert "NEO4J_ISOLATION=tenant" in message and "smriti-erin" in message
    with neo4j.GraphDatabase.driver(
        neo4j_server.uri, auth=(neo4j_server.username, neo4j_server.password)
    ) as driver:
        names = [r["name"] for r in driver.execute_query("SHOW DATABASES YIELD name").records]
    assert "smriti-erin" not in names


class _PinnedDatabase(Neo4jBackend):
    """Database mode whose per-user database is the one Community already has."""

    @staticmethod
    def database_for(user: str) -> str:
        return "neo4j"


def test_database_mode_sends_every_statement_to_the_users_database(
    neo4j_server: ServerInfo, make_backend: Callable[..., Neo4jBackend]
) -> None:
    build = GraphBuilder(8)
    backend = _PinnedDatabase(
        "frank",
        uri=neo4j_server.uri,
        username=neo4j_server.username,
        password=neo4j_server.password,
        isolation="database",
    )
    with backend:
        backend.add_memory(build.engram(1), [build.cue("kiwi")], [])
        assert [e.id for e in backend.list_engrams(5)] == ["e00001"]
        assert backend.vector_search(build.vec(10_001), 1)[0][0] == "e00001"
    with neo4j.GraphDatabase.driver(
        neo4j_server.uri, auth=(neo4j_server.username, neo4j_server.password)
    ) as driver:
        records = driver.execute_query(
            "MATCH (e:Engram {id: 'e00001'}) RETURN e.user AS user", database_="neo4j"
        ).records
    assert [r["user"] for r in records] == ["frank"]
