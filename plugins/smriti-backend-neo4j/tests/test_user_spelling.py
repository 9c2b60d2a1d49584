"""Tenant memories an older Smriti stored under a mixed-case user name are never
silently split from the now case-insensitive user's: opening refuses, naming them, and
the statement its error gives moves them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from smriti_backend_neo4j.backend import Neo4jBackend

from smriti import ConfigError
from smriti.testing import GraphBuilder

from .conftest import ServerInfo


def test_tenant_data_under_an_old_spelling_is_refused_then_moved(
    make_backend: Callable[..., Neo4jBackend], neo4j_server: ServerInfo
) -> None:
    import neo4j

    build = GraphBuilder(8)
    old = make_backend("Alice")  # as an older version, which kept names as typed
    old.add_memory(build.engram(1), [build.cue("apple")], [])
    old.set_meta("k", "v")
    make_backend("bob").add_memory(build.engram(2), [build.cue("pear")], [])
    with pytest.raises(ConfigError) as refused:
        make_backend("alice")
    message = str(refused.value)
    assert "'Alice'" in message and "user 'alice'" in message, message
    statement = message.split('"')[1]  # the fix, as the error spells it
    auth = (neo4j_server.username, neo4j_server.password)
    with (
        neo4j.GraphDatabase.driver(neo4j_server.uri, auth=auth) as driver,
        driver.session() as session,  # IN TRANSACTIONS needs an auto-commit query
    ):
        session.run(statement).consume()
    alice = make_backend("alice")
    assert [e.id for e in alice.iter_engrams()] == ["e00001"]
    assert alice.get_meta("k") == "v"
    assert [e.id for e in make_backend("bob").iter_engrams()] == ["e00002"]
