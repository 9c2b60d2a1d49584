"""A memory is acknowledged only once durable; a damaged store is refused, not emptied.

The journal's failures are made real at the file level (a short write, a failed
fsync); Kùzu's own failure on a full disk is made real on a small tmpfs (as root) or
under a file-size limit (``RLIMIT_FSIZE``), in a subprocess, since Kùzu 0.11.3 aborted
the process there. The end-to-end run through the ``smriti`` server is
tests/test_disk_full.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from smriti_embedded_graph import durability, writebehind
from smriti_embedded_graph.testing import engine_under_test

from smriti.backend import BackendError, Listing, StorageFullError, list_key
from smriti.testing import GraphBuilder

Backend = engine_under_test()
DB_FILE = Backend.db_file

build = GraphBuilder(8)


@contextmanager
def _opened(path: Path, **kwargs: Any) -> Iterator[Backend]:
    backend = Backend("alice", path, **kwargs)
    backend.open()
    try:
        yield backend
    finally:
        backend.close()


def _ids(path: Path) -> list[str]:
    with _opened(path) as backend:
        return sorted(r[0] for r in backend.journal.query("MATCH (e:Engram) RETURN e.id"))


def _manifest(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(DB_FILE + ".manifest.json").read_text())


class _ShortWrites:
    """A journal file whose writes stop short: half a line, then "no space left"."""

    def __init__(self, real: Any) -> None:
        self.real, self.calls = real, 0

    def write(self, data: memoryview) -> int:
        self.calls += 1
        if self.calls == 1:
            return self.real.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


# -- the journal --------------------------------------------------------------------------
def test_short_journal_write_fails_the_store_and_is_cut_back(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    with _opened(path) as backend:
        backend.add_memory(build.engram(1), [build.cue("x")], [])
        before = backend.journal.journal_path.stat().st_size
        backend.journal._journal = _ShortWrites(backend.journal._open_journal())
        with pytest.raises(StorageFullError, match="disk full: the memory was not stored"):
            backend.add_memory(build.engram(2), [build.cue("y")], [])
        assert backend.journal.journal_path.stat().st_size == before  # the half line is gone
        assert backend.get_engrams(["e00002"]) == []
        backend.journal._journal = backend.journal._journal.real
        backend.add_memory(build.engram(3), [], [])  # the next store works
    assert _ids(path) == ["e00001", "e00003"]


def test_failed_fsync_fails_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "alice" / DB_FILE
    with _opened(path) as backend:
        backend.add_memory(build.engram(1), [], [])
        before = backend.journal.journal_path.stat().st_size
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            monkeypatch.setattr(writebehind.os, "fsync", real_fsync)  # fails once
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(writebehind.os, "fsync", fsync)
        with pytest.raises(BackendError, match="cannot write the journal"):
            backend.add_memory(build.engram(2), [], [])
        assert backend.journal.journal_path.stat().st_size == before
        assert backend.journal.writes_queued() + backend.count_engrams() == 1
    assert _ids(path) == ["e00001"]


def test_store_is_refused_below_the_reserve_and_reads_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alice" / DB_FILE
    with _opened(path) as backend:
        backend.add_memory(build.engram(1), [build.cue("x")], [])
        backend.count_engrams()
        monkeypatch.setattr(durability, "free_bytes", lambda _: durability.STORE_RESERVE)
        with pytest.raises(StorageFullError, match=f"free space at {path.parent}"):
            backend.add_memory(build.engram(2), [], [])
        assert [e.id for e in backend.list_page(Listing(5))] == ["e00001"]
        assert backend.count_engrams() == 1
        monkeypatch.undo()
        backend.add_memory(build.engram(3), [], [])
    assert _ids(path) == ["e00001", "e00003"]


def test_queued_memories_wait_for_room_and_are_listed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alice" / DB_FILE
    with _opened(path) as backend:
        backend.add_memory(build.engram(1), [], [])
        # Let its background write finish (on a busy machine it may not have run yet, and
        # run later it would write the next memory too): the writer runs one task at a time.
        backend.journal._writer.submit(lambda: None).result()
        backend.journal._write_in_background = lambda: None  # type: ignore[method-assign]
        correction = build.engram(2, supersedes="e00001", tags=["fixed"])
        backend.add_memory(correction, [], [])
        monkeypatch.setattr(durability, "free_bytes", lambda _: 0)  # no room for Kùzu
        with pytest.raises(StorageFullError, match="1 stored memories wait"):
            backend.journal.write_queued()
        assert sorted(e.id for e in backend.list_page(Listing(5))) == ["e00001", "e00002"]
        # The queued memory passes the listing's filters like a stored one.
        assert [e.id for e in backend.list_page(Listing(5, tags=["fixed"]))] == ["e00002"]
        assert backend.list_page(Listing(5, tags=["fixed"], after=list_key(correction))) == []
        assert backend.get_engrams(["e00002"])[0].supersedes == "e00001"
        monkeypatch.undo()
    assert _ids(path) == ["e00001", "e00002"]


# -- Kùzu on a full disk, in a subprocess -------------------------------------------------
_FULL_DISK_CHILD = """
    import os, resource, sys
    from smriti.testing import GraphBuilder
    from smriti_embedded_graph import durability
    from smriti_embedded_graph.testing import engine_under_test
    Backend = engine_under_test()
    path, mode = {path!r}, {mode!r}
    build = GraphBuilder(8)
    backend = Backend("alice", path)
    backend.open()
    for i in range(20):
        backend.add_memory(build.engram(i), [build.cue(f"k{{i}}")], [])
    assert backend.journal.checkpoint(force=True)  # all in the file; journal and WAL empty
    durability.has_room = lambda path, needed: True  # no guard: let Kùzu hit the wall
    big = "x" * 250_000
    if mode == "tmpfs":  # room for the journal line, not for the WAL record too
        with open(os.path.join(os.path.dirname(path), "filler"), "wb") as out:
            free = os.statvfs(os.path.dirname(path))
            out.write(b"0" * (free.f_bavail * free.f_frsize - 350_000))
    else:  # a WAL larger than the journal, then a limit the line fits under, not the WAL
        backend.set_meta("padding", "p" * 300_000)
        limit = os.path.getsize(path + ".wal") + 200_000
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    backend.add_memory(build.engram(99, content=big), [], [])  # journaled: acknowledged
    try:
        backend.journal.write_queued()
    except Exception as exc:
        print("kuzu write failed:", exc, file=sys.stderr)
    else:
        raise SystemExit("the Kùzu write did not fail")
    assert backend.store.kuzu_failed
    backend.close()
    sys.exit(0)  # a normal exit: interpreter teardown must not abort either
"""


def _mount(target: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(target)])
    return done.returncode == 0


@pytest.mark.parametrize("mode", ["tmpfs", "rlimit"])
def test_kuzu_write_failure_on_a_full_disk_does_not_abort(tmp_path: Path, mode: str) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    if mode == "tmpfs" and not _mount(disk):
        pytest.skip("mounting a tmpfs needs root")
    try:
        path = disk / "alice" / DB_FILE
        script = textwrap.dedent(_FULL_DISK_CHILD.format(path=str(path), mode=mode))
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "kuzu write failed" in done.stderr and "terminate called" not in done.stderr
        assert "kuzu store left unclosed" in done.stderr  # not closed: that aborted
        (path.parent / "filler").unlink(missing_ok=True)  # space is back
        with _opened(path) as backend:
            ids = sorted(r[0] for r in backend.journal.query("MATCH (e:Engram) RETURN e.id"))
            assert ids == sorted([f"e{i:05d}" for i in range(20)] + ["e00099"])
            backend.add_memory(build.engram(100), [], [])  # and it takes new memories
    finally:
        if mode == "tmpfs":
            subprocess.run(["umount", "-l", str(disk)], check=False)


# -- the manifest -------------------------------------------------------------------------
def test_new_store_and_store_without_a_manifest_open(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    with _opened(path):
        pass
    assert _manifest(path)["engrams"] == 0
    with _opened(path) as backend:
        backend.add_memory(build.engram(1), [], [])
        backend.add_memory(build.engram(2), [], [])
    assert _manifest(path)["engrams"] == 2
    assert _manifest(path)["db_bytes"] == path.stat().st_size
    path.with_name(DB_FILE + ".manifest.json").unlink()  # as made by an older version
    assert _ids(path) == ["e00001", "e00002"]
    assert _manifest(path)["engrams"] == 2


def test_forget_then_crash_still_opens(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    with _opened(path) as backend:
        for i in range(3):
            backend.add_memory(build.engram(i), [], [])
    assert _manifest(path)["engrams"] == 3
    script = f"""
        import os
        from smriti_embedded_graph.testing import engine_under_test
        Backend = engine_under_test()
        backend = Backend("alice", {str(path)!r})
        backend.open()
        assert backend.delete_engrams(["e00000", "e00001"]) == 2
        os._exit(0)  # killed before close: no checkpoint, no manifest at close
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    assert _manifest(path)["engrams"] == 1  # lowered before the delete committed
    assert _ids(path) == ["e00002"]


@pytest.fixture
def held(tmp_path: Path) -> Path:
    """A closed store that held three memories."""
    path = tmp_path / "alice" / DB_FILE
    with _opened(path) as backend:
        for i in range(3):
            backend.add_memory(build.engram(i), [build.cue(f"k{i}")], [])
    return path


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (lambda db: db.write_bytes(b""), "is empty (0 bytes)"),
        (lambda db: db.unlink(), "is missing"),
        (lambda db: os.truncate(db, db.stat().st_size // 2), "has shrunk to"),
    ],
    ids=["zero-bytes", "missing", "shrunken"],
)
def test_damaged_database_is_refused_and_left_as_it_is(held: Path, damage: Any, what: str) -> None:
    damage(held)
    before = sorted(p.name for p in held.parent.iterdir())
    size = held.stat().st_size if held.exists() else None
    with pytest.raises(BackendError, match="held 3 memories") as refused:
        Backend("alice", held).open()
    message = str(refused.value)
    assert str(held) in message and what in message and "smriti import" in message
    assert sorted(p.name for p in held.parent.iterdir()) == before
    assert (held.stat().st_size if held.exists() else None) == size


def test_store_holding_fewer_memories_than_the_manifest_is_refused(held: Path) -> None:
    manifest = held.with_name(DB_FILE + ".manifest.json")
    manifest.write_text(json.dumps({"version": 1, "engrams": 10, "db_bytes": 0}))
    with pytest.raises(BackendError, match="holds only 3 memories, but it held 10"):
        Backend("alice", held).open()
    assert json.loads(manifest.read_text())["engrams"] == 10  # the refusal kept it


def test_damaged_manifest_is_refused(held: Path) -> None:
    held.with_name(DB_FILE + ".manifest.json").write_text("{not json")
    with pytest.raises(BackendError, match="manifest .* is damaged"):
        Backend("alice", held).open()
