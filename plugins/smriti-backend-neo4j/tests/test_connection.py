"""Connection checks: clear errors for a wrong password, an unreachable server or one that
does not finish a read."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest
from smriti_backend_neo4j.backend import Neo4jBackend
from structlog.testing import capture_logs

from smriti.backend import BackendError
from smriti.config import Settings

from .conftest import ServerInfo, server_module


def test_wrong_password_names_the_server_and_the_settings(neo4j_server: ServerInfo) -> None:
    backend = neo4j_server.backend("alice", password="not-the-password")
    with pytest.raises(BackendError) as caught:
        backend.open()
    message = str(caught.value)
    assert neo4j_server.uri in message
    assert "NEO4J_PASSWORD" in message and "rejected the credentials" in message
    assert "not-the-password" not in message
    backend.close()


def test_unreachable_server_fails_fast_naming_the_uri() -> None:
    uri = f"bolt://127.0.0.1:{server_module.free_port()}"
    backend = Neo4jBackend("alice", uri=uri, password="x", connect_timeout=2)
    began = time.monotonic()
    with pytest.raises(BackendError, match="cannot connect to Neo4j at") as caught:
        backend.open()
    assert uri in str(caught.value) and "NEO4J_URI" in str(caught.value)
    assert time.monotonic() - began < 10


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """A TCP port that accepts connections but never speaks Bolt."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"bolt://127.0.0.1:{s.getsockname()[1]}"


def test_server_that_never_answers_times_out(silent_listener: str) -> None:
    backend = Neo4jBackend("alice", uri=silent_listener, password="x", connect_timeout=1.5)
    began = time.monotonic()
    with pytest.raises(BackendError, match="timeout 1.5s"):
        backend.open()
    assert time.monotonic() - began < 15


def test_bad_uri_scheme_is_a_clear_error() -> None:
    backend = Neo4jBackend("alice", uri="http://127.0.0.1:7474", password="x")
    with pytest.raises(BackendError, match="NEO4J_URI"):
        backend.open()


def test_from_settings_reads_the_neo4j_variables(neo4j_server: ServerInfo) -> None:
    settings = Settings.from_env(
        {
            "NEO4J_URI": neo4j_server.uri,
            "NEO4J_USERNAME": neo4j_server.username,
            "NEO4J_PASSWORD": neo4j_server.password,
            "NEO4J_DATABASE": "neo4j",
            "NEO4J_ISOLATION": "tenant",
        }
    )
    backend = Neo4jBackend.from_settings(settings, "dave")
    assert (backend.uri, backend.database, backend.isolation) == (
        neo4j_server.uri,
        "neo4j",
        "tenant",
    )
    assert neo4j_server.password not in repr(backend)
    with backend:
        assert backend.count_engrams() >= 0
    backend.close()  # closing twice is fine


def test_missing_database_is_a_clear_error(neo4j_server: ServerInfo) -> None:
    backend = neo4j_server.backend("alice", database="nosuchdb")
    with pytest.raises(BackendError, match="nosuchdb"):
        backend.open()


def test_a_read_the_server_does_not_finish_ends_with_a_clear_error(
    make_backend: Callable[..., Neo4jBackend],
) -> None:
    # A statement that runs far longer than its bound stands in for a stuck server: the
    # read is ended by the server, run again, then reported, never waited on for ever.
    backend = make_backend("alice", read_timeout=0.3, retry_seconds=0.5)
    endless = "UNWIND range(1, 2000000000) AS x WITH x WHERE x < 0 RETURN count(*) AS n"
    with capture_logs() as logs, pytest.raises(BackendError, match="did not answer a read within"):
        backend._run(endless, read=True)
    retried = [e for e in logs if e["event"] == "neo4j transaction retried"]
    assert retried and all(e["log_level"] == "warning" for e in retried)
    assert backend.count_engrams() == 0  # the connection is still good
