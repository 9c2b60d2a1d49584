"""Where the store is, how big it is, and which process holds it open.

Doctor never opens the store: it looks at the files and, on Linux, at every process's
open file descriptors (``/proc/*/fd``) to name the holder of an embedded database.
A store that does not exist yet is reported as such and not created.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from smriti.doctor.checks import Check, fail, ok, warn

PROC = Path("/proc")
COMMAND_CHARS = 120


@dataclass(frozen=True, slots=True)
class Holder:
    """A process with the store open."""

    pid: int
    command: str


def store_checks(path: Path, owner_pid: int | None = None) -> list[Check]:
    """The store file's state and, when it exists, who holds it (``owner_pid``: the
    store's owner process, whose holding it is the normal state)."""
    path = path.expanduser()
    if path.is_dir():
        return [
            fail(
                "store",
                f"{path} is a directory, not a database file",
                "move it aside or point STORAGE_LOCATION elsewhere",
            )
        ]
    unusable = unusable_store(path)
    if unusable is not None:
        return [unusable]
    if not path.exists():
        return [_missing(path)]
    size = human_size(store_size(path))
    return [ok("store", f"{path} ({size})"), holder_check(path, owner_pid)]


def unusable_store(path: Path) -> Check | None:
    """A failed check when the store at ``path`` (its database file) cannot be written
    or created (a read-only file system, another user's directory, a file where a
    directory belongs); None when it can."""
    from smriti.validation import STORAGE_FIX, unwritable_storage

    path = path.expanduser()
    blocker = nearest_existing(path.parent)
    if not blocker.is_dir():
        detail = f"the store at {path} cannot be created: {blocker} is a file, not a directory"
        return fail("store", detail, STORAGE_FIX)
    unwritable = unwritable_storage(path.parent)
    if unwritable is None:
        return None
    where, why = unwritable
    verb = "cannot be written" if path.exists() else "cannot be created"
    return fail("store", f"the store at {path} {verb}: {where} {why}", STORAGE_FIX)


def _missing(path: Path) -> Check:
    parent = nearest_existing(path.parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        return fail(
            "store",
            f"no store yet at {path}, and it cannot be created: {parent} is not writable",
            "set STORAGE_LOCATION (or --storage) to a writable directory",
        )
    return ok("store", f"no store yet at {path} (created on first use)")


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def store_size(path: Path) -> int:
    """Bytes in the database file and its companions (``memory.kuzu.wal``, ...)."""
    total = 0
    for item in path.parent.glob(f"{path.name}*"):
        try:
            total += item.stat().st_size
        except OSError:  # removed while we looked
            continue
    return total


def human_size(size: int) -> str:
    """``12.3 MB`` style."""
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"


def holder_check(path: Path, owner_pid: int | None = None) -> Check:
    """Which process holds the store: reported, never a failure. The store's owner
    process holding it is the normal state; any other process keeps the others out."""
    if not sys.platform.startswith("linux") or not PROC.is_dir():
        return ok("store lock", "holder unknown (needs /proc, Linux only)")
    holders, hidden = find_holders(path)
    if not holders:
        extra = f"; {hidden} processes could not be inspected" if hidden else ""
        return ok("store lock", f"not held by any process{extra}")
    if [h.pid for h in holders] == [owner_pid]:
        return ok("store lock", f"held by the owner process, pid {owner_pid}")
    shown = "; ".join(f"pid {h.pid} ({h.command})" for h in holders if h.pid != owner_pid)
    return warn(
        "store lock",
        f"held by {shown}",
        "a process that opened the store itself (SMRITI_OWNER=off) keeps every other "
        "out while it runs; stop it, or use that server's MCP tools",
    )


def find_holders(path: Path) -> tuple[list[Holder], int]:
    """Processes (not this one) with ``path`` or a companion file open; and how many
    processes could not be inspected (other users' processes without privileges)."""
    target = os.path.realpath(path)
    holders: list[Holder] = []
    hidden = 0
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if _holds(entry / "fd", target):
                holders.append(Holder(int(entry.name), _command(entry)))
        except PermissionError:
            hidden += 1
        except OSError:  # the process ended while we looked
            continue
    return holders, hidden


def _holds(fd_dir: Path, target: str) -> bool:
    for fd in os.listdir(fd_dir):
        try:
            opened = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if opened == target or opened.startswith(target + "."):
            return True
    return False


def _command(proc: Path) -> str:
    try:
        raw = (proc / "cmdline").read_bytes()
    except OSError:
        return "?"
    text = " ".join(raw.decode(errors="replace").replace("\0", " ").split())
    return (text[: COMMAND_CHARS - 1] + "…" if len(text) > COMMAND_CHARS else text) or "?"
