"""The embedded Kùzu store on a full disk, through the real ``smriti`` console script.

A small real filesystem (a 20 MB tmpfs, mounted by the test as root) holds the store;
the server runs as MCP clients start it (stdio, no API keys) and is driven with the SDK
client. A store on a full disk must fail with a tool error that says so, and nothing
that was acknowledged may be lost: not while the disk is full (reads keep working), not
at shutdown (Kùzu 0.11.3 aborted the process there), and not after space is freed.
Without root, the same run uses a per-process file-size limit (``RLIMIT_FSIZE``)
instead of a small filesystem.

Also here: a store whose database file was emptied, removed or cut short is refused
with a one-line error naming the file, instead of opening as an empty store.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="tmpfs and RLIMIT_FSIZE")

SMRITI = shutil.which("smriti", path=str(Path(sys.executable).parent)) or "smriti"
SECRET_VARS = ("LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY")
USER = "diskfull"
DISK_MB = 20
FREED_MB = 64
#: Left free by the filler before the stores start: the stores then fill the rest.
LEFT_FREE = 6 * 2**20
#: The file-size limit of the fallback run (without root), in bytes.
FSIZE_LIMIT = 3 * 2**20
#: Exit codes of a process killed by a signal, as sh reports them (abort, segfault).
SIGNALLED = range(129, 160)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Disk:
    """Where the store lives, and how it is made full and freed again."""

    root: Path
    #: ``ulimit -f`` blocks for the server (the fallback), else None (a real tmpfs).
    fsize_blocks: int | None = None
    filler: Path = field(init=False)

    def __post_init__(self) -> None:
        self.filler = self.root / "filler"

    def fill(self, leave: int = 0) -> None:
        """Take the free space down to about ``leave`` bytes (tmpfs only)."""
        if self.fsize_blocks is not None:
            return
        stat = os.statvfs(self.root)
        room = stat.f_bavail * stat.f_frsize - leave
        with self.filler.open("ab", buffering=0) as out:  # unbuffered: close cannot fail
            try:
                while room > 0:
                    written = out.write(b"\0" * min(room, 2**20))
                    if not written:
                        break
                    room -= written
            except OSError:  # full already
                pass

    def free(self) -> None:
        """Give space back: the filler goes and the tmpfs grows (Kùzu's first checkpoint
        of a small store needs ~20 MB); the fallback's file-size limit is lifted."""
        self.filler.unlink(missing_ok=True)
        if self.fsize_blocks is None:
            remount = ["mount", "-o", f"remount,size={FREED_MB}m", str(self.root)]
            subprocess.run(remount, check=True, capture_output=True)
        self.fsize_blocks = None


def _mount_tmpfs(target: Path) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(target)],
        capture_output=True,
    )
    return done.returncode == 0


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    """A 20 MB tmpfs at tmp_path/disk (root), else a plain folder with a size limit."""
    root = tmp_path / "disk"
    root.mkdir()
    if _mount_tmpfs(root):
        try:
            yield Disk(root)
        finally:
            subprocess.run(["umount", "-l", str(root)], check=False)
        return
    yield Disk(root, fsize_blocks=FSIZE_LIMIT // 512)


def _env(disk: Disk) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}
    env.update(
        STORAGE_LOCATION=str(disk.root / "store"),
        ACCESSING_USER=USER,
        HOME=str(disk.root.parent / "home"),
        CONSOLIDATION_INTERVAL="0",
        BACKUP_SYNC_INTERVAL="0",
        BACKUP_TYPE="none",
        LOG_LEVEL="info",
        PYTHONUNBUFFERED="1",
        HF_HUB_OFFLINE="1",  # no model download: it would fill the small disk
    )
    return env


def _shell(disk: Disk, args: str) -> str:
    """``smriti ARGS`` under sh, with the fallback's file-size limit if any."""
    limit = f"ulimit -f {disk.fsize_blocks}; " if disk.fsize_blocks is not None else ""
    return f"{limit}{shlex.quote(SMRITI)} {args}"


def _cli(disk: Disk, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a CLI command in its own process (Kùzu may abort: it must not)."""
    command = _shell(disk, " ".join(shlex.quote(a) for a in args))
    return subprocess.run(
        ["/bin/sh", "-c", command], env=_env(disk), capture_output=True, text=True, timeout=120
    )


class Server:
    """One ``smriti`` stdio server; ``rc`` is its exit code once the client is gone."""

    def __init__(self, disk: Disk, name: str) -> None:
        self.rc_file = disk.root.parent / f"{name}.rc"
        self.log = disk.root.parent / f"{name}.log"
        script = f"{_shell(disk, '')}; echo $? > {shlex.quote(str(self.rc_file))}"
        self.params = StdioServerParameters(command="/bin/sh", args=["-c", script], env=_env(disk))

    async def rc(self) -> int:
        for _ in range(300):  # sh writes the file just after the server exits
            if self.rc_file.exists() and self.rc_file.read_text().strip():
                return int(self.rc_file.read_text())
            await anyio.sleep(0.1)
        raise AssertionError(f"the server did not exit: {self.log.read_text()}")


async def _store(client: Client, i: int) -> Any:
    content = f"memory {i}: the probe at depth {i * 7} metres read {i * 13 % 97} units. " * 20
    return await client.call_tool("smriti_store", {"content": content, "tags": f"probe,n{i}"})


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def _exported_ids(disk: Disk, out: Path) -> set[str]:
    done = _cli(disk, "export", str(out))
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return {r["id"] for r in records if r.get("kind") == "engram"}


@pytest.fixture
def patient_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the server close on its own: the SDK kills it 2 s after stdin closes, which a
    loaded machine can exceed, and then its exit code (the point here) is lost."""
    import mcp.client.stdio

    monkeypatch.setattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 60.0)


@pytest.mark.anyio
@pytest.mark.usefixtures("patient_client")
async def test_full_disk_loses_no_acknowledged_memory(disk: Disk) -> None:
    acknowledged: list[str] = []
    refusal = ""
    first = Server(disk, "first")
    with first.log.open("w") as errlog:
        async with Client(stdio_client(first.params, errlog=errlog), mode="legacy") as client:
            for i in range(3):
                stored = await _store(client, i)
                assert not stored.is_error, _text(stored)
                acknowledged.append(stored.structured_content["id"])
            disk.fill(leave=LEFT_FREE)
            for i in range(3, 2000):  # until the disk is full
                stored = await _store(client, i)
                if stored.is_error:
                    refusal = _text(stored)
                    break
                acknowledged.append(stored.structured_content["id"])
            assert refusal, "no store failed"
            assert "disk full" in refusal and "free space at" in refusal, refusal
            # Another program takes the rest: the memories stay readable, stores fail.
            disk.fill()
            again = await _store(client, 9999)
            assert again.is_error and "disk full" in _text(again), _text(again)
            recalled = await client.call_tool("smriti_recall", {"query": "probe depth metres"})
            assert not recalled.is_error, _text(recalled)
            assert recalled.structured_content["results"]
            listed = await client.call_tool("smriti_recall", {"mode": "list", "limit": 5})
            assert not listed.is_error, _text(listed)
    rc = await first.rc()
    assert rc == 0, first.log.read_text()
    assert "terminate called" not in first.log.read_text()
    assert len(acknowledged) > 3

    # Opening while the disk is still full: a clear error or an answer, never an abort.
    while_full = _cli(disk, "stats")
    assert while_full.returncode not in SIGNALLED and while_full.returncode >= 0
    assert "terminate called" not in while_full.stderr
    if while_full.returncode:
        assert "disk full" in while_full.stderr, while_full.stderr

    disk.free()
    assert set(acknowledged) <= _exported_ids(disk, disk.root.parent / "export.jsonl")
    second = Server(disk, "second")
    with second.log.open("w") as errlog:
        async with Client(stdio_client(second.params, errlog=errlog), mode="legacy") as client:
            stored = await _store(client, 10_000)
            assert not stored.is_error, _text(stored)
            acknowledged.append(stored.structured_content["id"])
    assert await second.rc() == 0, second.log.read_text()
    assert set(acknowledged) <= _exported_ids(disk, disk.root.parent / "export2.jsonl")


# -- a damaged database file is refused, never replaced by an empty store ------------------
@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store (in a plain folder) holding three memories, made once."""
    disk = Disk(tmp_path_factory.mktemp("pristine"))
    for i in range(3):
        done = _cli(disk, "store", f"memory number {i} about lighthouses")
        assert done.returncode == 0, done.stderr
    stopped = _cli(disk, "owner", "stop")  # closed: its owner process has let go
    assert stopped.returncode == 0, stopped.stderr
    return disk.root / "store"


@pytest.fixture
def held(pristine: Path, tmp_path: Path) -> Disk:
    """A copy of the pristine store for one test."""
    shutil.copytree(pristine, tmp_path / "store")
    return Disk(tmp_path)


def _db(disk: Disk) -> Path:
    return disk.root / "store" / USER / "memory.lbug"  # a new store: LadybugDB


def _assert_refused(disk: Disk, what: str) -> None:
    done = _cli(disk, "stats")
    assert done.returncode == 1, (done.stdout, done.stderr)
    [line] = [x for x in done.stderr.splitlines() if x.startswith("smriti: error:")]
    assert str(_db(disk)) in line and what in line, line
    assert "smriti import" in line and "held 3 memories" in line, line
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (lambda db: db.write_bytes(b""), "is empty (0 bytes)"),
        (lambda db: db.unlink(), "is missing"),
        (lambda db: os.truncate(db, db.stat().st_size // 2), "has shrunk"),
    ],
    ids=["zero-bytes", "missing", "shrunken"],
)
def test_damaged_database_file_is_refused(held: Disk, damage: Any, what: str) -> None:
    damage(_db(held))
    _assert_refused(held, what)
    _assert_refused(held, what)  # and refused again: the refusal changed nothing


def test_forgetting_memories_still_opens_and_moving_aside_starts_empty(held: Disk) -> None:
    listed = _cli(held, "recall", "--json")
    ids = [r["id"] for r in json.loads(listed.stdout)["results"]] if listed.returncode == 0 else []
    assert len(ids) == 3, (listed.stdout, listed.stderr)
    for memory_id in ids[:2]:
        done = _cli(held, "forget", memory_id)
        assert done.returncode == 0, done.stderr
    stats = _cli(held, "stats")
    assert stats.returncode == 0, stats.stderr
    # Moving the files aside, as the refusal says, starts an empty store deliberately.
    for path in _db(held).parent.glob("memory.lbug*"):
        path.rename(held.root / path.name)
    assert _cli(held, "stats").returncode == 0
