"""Fixtures: one real Neo4j Community server per test session, and fresh backends.

The server is started from Maven Central jars (downloaded on first use into
``~/.cache/smriti-test/neo4j``) by ``tests/neo4j_server/server.py`` and stopped at the
end of the session. A server that cannot start fails the tests, and so does a machine
without Java or Maven, unless ``SMRITI_REQUIRE_BACKENDS=0`` lets a developer without
them skip these tests (CI never sets it). ``SMRITI_NEO4J_URI`` (with
``SMRITI_NEO4J_USERNAME``/``_PASSWORD``) points the tests at an existing server instead;
its data is wiped between tests.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import structlog
from smriti_backend_neo4j.backend import Neo4jBackend

HERE = Path(__file__).resolve().parent


def _load_server_module() -> ModuleType:
    path = HERE / "neo4j_server" / "server.py"
    spec = importlib.util.spec_from_file_location("smriti_neo4j_test_server", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


server_module = _load_server_module()


class ServerInfo:
    """Where the test server listens and how to log in."""

    def __init__(self, uri: str, username: str, password: str) -> None:
        self.uri, self.username, self.password = uri, username, password

    def backend(self, user: str, **options: object) -> Neo4jBackend:
        """An unopened backend on this server."""
        kwargs: dict[str, object] = {
            "uri": self.uri, "username": self.username, "password": self.password,
        }  # fmt: skip
        kwargs.update(options)
        return Neo4jBackend(user, **kwargs)  # type: ignore[arg-type]


def _required() -> bool:
    return os.environ.get("SMRITI_REQUIRE_BACKENDS", "1").strip() != "0"


@pytest.fixture(scope="session")
def neo4j_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """A running Neo4j server for the whole session (started here unless given)."""
    external = os.environ.get("SMRITI_NEO4J_URI")
    if external:
        yield ServerInfo(
            external,
            os.environ.get("SMRITI_NEO4J_USERNAME", "neo4j"),
            os.environ.get("SMRITI_NEO4J_PASSWORD", ""),
        )
        return
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing and not _required():
        pytest.skip(f"{' and '.join(missing)} not installed: cannot run the Neo4j test server")
    try:
        server = server_module.start(tmp_path_factory.mktemp("neo4j"))
    except server_module.ServerError as exc:
        pytest.fail(f"the Neo4j test server did not start: {exc}", pytrace=False)
    structlog.get_logger("tests").info(
        "neo4j test server", uri=server.uri, start_seconds=round(server.start_seconds, 1)
    )
    try:
        yield ServerInfo(server.uri, server.username, server.password)
    finally:
        server.stop()


def wipe(info: ServerInfo) -> None:
    """Delete every node and every vector index, so a test starts from nothing."""
    import neo4j

    with neo4j.GraphDatabase.driver(info.uri, auth=(info.username, info.password)) as driver:
        with driver.session() as session:  # IN TRANSACTIONS needs an auto-commit query
            session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS").consume()
        for record in driver.execute_query("SHOW VECTOR INDEXES YIELD name").records:
            # Index names come from the server's own listing, backtick-quoted.
            driver.execute_query(f"DROP INDEX `{record['name'].replace('`', '``')}` IF EXISTS")


@pytest.fixture
def make_backend(neo4j_server: ServerInfo) -> Iterator[Callable[..., Neo4jBackend]]:
    """``make(user, **options)``: an opened backend on a wiped server, closed afterwards."""
    wipe(neo4j_server)
    opened: list[Neo4jBackend] = []

    def make(user: str, **options: object) -> Neo4jBackend:
        backend = neo4j_server.backend(user, **options)
        backend.open()
        opened.append(backend)
        return backend

    yield make
    for backend in opened:
        backend.close()
