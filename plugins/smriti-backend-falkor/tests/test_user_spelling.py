"""Memories an older Smriti stored under a mixed-case user name are never silently
split from the canonical user's: the backend refuses to open, naming them, and the
statement its error gives moves them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from smriti_backend_falkor.backend import FalkorBackend

from smriti import ConfigError
from smriti.testing import GraphBuilder


@pytest.fixture
def server(falkor_addr: str) -> Iterator[object]:
    from falkordb import FalkorDB

    host, port = falkor_addr.rsplit(":", 1)
    db = FalkorDB(host=host, port=int(port))
    yield db
    db.close()


def test_tenant_data_under_an_old_spelling_is_refused_then_moved(
    make_backend: Callable[..., FalkorBackend], server: object
) -> None:
    build = GraphBuilder(8)
    old = make_backend("Alice")  # as an older version, which kept names as typed
    old.add_memory(build.engram(1), [build.cue("apple")], [])
    old.close()
    with pytest.raises(ConfigError) as refused:
        make_backend("alice")
    message = str(refused.value)
    assert "'Alice'" in message and "user 'alice'" in message and old.graph_name in message
    statement = message.split('"')[1]  # the fix, as the error spells it
    assert statement == "MATCH (n) WHERE n.user = 'Alice' SET n.user = 'alice'"
    server.select_graph(old.graph_name).query(statement)  # type: ignore[attr-defined]
    alice = make_backend("alice")
    assert [e.id for e in alice.iter_engrams()] == ["e00001"]
    assert alice.count_engrams() == 1
    make_backend("bob")  # other users are not concerned


def test_a_graph_under_an_old_spelling_is_refused_then_renamed(
    make_backend: Callable[..., FalkorBackend], server: object
) -> None:
    build = GraphBuilder(8)
    old = make_backend("Carol", "graph")
    old.add_memory(build.engram(2), [build.cue("pear")], [])
    old.close()
    with pytest.raises(ConfigError, match="RENAME Carol_smriti carol_smriti") as refused:
        make_backend("carol", "graph")
    assert "exists too" not in str(refused.value)
    graphs = set(server.list_graphs())  # type: ignore[attr-defined]
    assert "carol_smriti" not in graphs, "the refused open created nothing"
    server.connection.rename("Carol_smriti", "carol_smriti")  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="holds memories of 'Carol'") as again:
        make_backend("carol", "graph")
    statement = str(again.value).split('"')[1]
    server.select_graph("carol_smriti").query(statement)  # type: ignore[attr-defined]
    carol = make_backend("carol", "graph")
    assert [e.id for e in carol.iter_engrams()] == ["e00002"]
