"""``NEO4J_ISOLATION=database``: safe per-user names, routing, and the Community error."""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable

import neo4j
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smriti_backend_neo4j.backend import Neo4jBackend
from smriti_backend_neo4j.naming import database_name_for

from smriti.backend import BackendError, EngramUpdate, Listing, Seek
from smriti.config import Settings
from smriti.testing import GraphBuilder

from .conftest import ServerInfo

VALID = re.compile(r"^[a-z][a-z0-9.-]{2,62}$")
HASHED = re.compile(r"-[0-9a-f]{24}$")
#: Valid Smriti user names (smriti.config.validate_user): 1-64 of [A-Za-z0-9._-], first a
#: letter or digit, not ending in a dot.
USERS = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z").filter(lambda u: not u.endswith("."))


@pytest.mark.parametrize(
    ("user", "want"),
    [
        ("alice", "smriti-alice"),
        ("bob-2", "smriti-bob-2"),
        ("a.b", "smriti-a.b"),
        ("9lives", "smriti-9lives"),
        ("x" * 56, "smriti-" + "x" * 56),
    ],
)
def test_plain_names_are_kept(user: str, want: str) -> None:
    assert database_name_for(user) == want


@pytest.mark.parametrize("user", ["Alice", "bob_smith", "x" * 57, "x" * 64, "a__b", "A" * 64])
def test_other_names_are_valid_and_carry_a_hash_of_the_exact_name(user: str) -> None:
    name = database_name_for(user)
    assert VALID.fullmatch(name), name
    assert name.startswith("smriti-")
    digest = hashlib.sha256(user.encode()).hexdigest()[:24]
    assert name.endswith("-" + digest)


def _tricky_users() -> list[str]:
    """Pairs that a lossy mapping merges: case, '_' against '-' and '.', long names that
    differ only past the cut, and plain names that look like another name's hashed form."""
    users = ["alice", "Alice", "ALICE", "alice_", "alice-", "a_b", "a-b", "a.b", "a..b", "a--b"]
    users += ["x" * n for n in (55, 56, 57, 63, 64)] + ["x" * 63 + c for c in "yYz_-0"]
    for user in ("x_y", "Bob", "a" * 64, "Q.q"):
        payload = database_name_for(user).removeprefix("smriti-")
        users += [user, payload, payload.upper()[:64], payload[:64]]
    users += ["x-y-" + "0" * 24, "x-y-" + "f" * 23, "x-y-" + "g" * 24]
    return [u for u in dict.fromkeys(users) if u and len(u) <= 64]


def test_tricky_names_never_share_a_database() -> None:
    users = _tricky_users()
    names = [database_name_for(u) for u in users]
    assert all(VALID.fullmatch(n) for n in names)
    assert len(set(names)) == len(users), [
        u for u in users if names.count(database_name_for(u)) > 1
    ]


def test_every_short_name_over_a_tricky_alphabet_has_its_own_database() -> None:
    users = [
        "".join(chars)
        for size in range(1, 5)
        for chars in itertools.product("aA0._-", repeat=size)
        if chars[0] in "aA0" and chars[-1] != "."
    ]
    names = {database_name_for(u) for u in users}
    assert len(names) == len(users)


@settings(max_examples=400, deadline=None)
@given(st.lists(USERS, min_size=2, max_size=8, unique=True))
def test_distinct_users_get_distinct_valid_databases(users: list[str]) -> None:
    names = [database_name_for(u) for u in users]
    assert all(VALID.fullmatch(n) for n in names), names
    assert len(set(names)) == len(users)


@settings(max_examples=300, deadline=None)
@given(USERS)
def test_a_hashed_name_is_never_the_plain_name_of_another_user(user: str) -> None:
    name = database_name_for(user)
    if HASHED.search(name):
        payload = name.removeprefix("smriti-")
        assert payload == user or database_name_for(payload) != name
    else:
        assert name == "smriti-" + user


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
        assert [e.id for e in backend.list_page(Listing(5))] == ["e00001"]
        backend.update_engrams([EngramUpdate("e00001", tags=["lime"], superseded_by="e00002")])
        assert [e.id for e in backend.list_page(Listing(5, tags=["lime"]))] == ["e00001"]
        assert backend.list_page(Listing(5, include_superseded=False)) == []
        assert backend.seek(Seek(k=1, vector=build.vec(10_001))).vector[0][0] == "e00001"
    with neo4j.GraphDatabase.driver(
        neo4j_server.uri, auth=(neo4j_server.username, neo4j_server.password)
    ) as driver:
        records = driver.execute_query(
            "MATCH (e:Engram {id: 'e00001'}) RETURN e.user AS user", database_="neo4j"
        ).records
    assert [r["user"] for r in records] == ["frank"]
