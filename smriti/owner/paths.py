"""Where a store's owner process keeps its socket, lock, status file and log.

Everything lives in the user's store directory (``{STORAGE_LOCATION}/{user}``), except
the socket when that path would be too long for ``AF_UNIX`` (108 bytes on Linux, 104 on
macOS): it then goes to a private per-uid directory (``$XDG_RUNTIME_DIR/smriti`` or
``/tmp/smriti-{uid}``, mode 0700 and checked to be ours), named by a hash of the store
directory, so every process computes the same path.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from smriti.errors import ConfigError

#: Longest socket path used as is; ``sun_path`` holds 104-108 bytes with the NUL.
MAX_SOCKET_BYTES = 100


@dataclass(frozen=True, slots=True)
class OwnerPaths:
    """The files of one store's owner."""

    dir: Path
    socket: Path
    #: Held (``flock``) by the owner for its whole life: the kernel releases it when the
    #: process ends in any way, so a crash never leaves a stale lock.
    lock: Path
    #: Serialises starting an owner, so that simultaneous launches start one.
    start_lock: Path
    #: The running owner's pid, start time and settings (for ``doctor``).
    info: Path
    #: The owner's log (it has no terminal).
    log: Path

    @classmethod
    def for_store(cls, user_dir: Path) -> OwnerPaths:
        """The paths for the store in ``user_dir`` (resolved, so that every spelling of
        the same directory finds the same owner)."""
        base = user_dir.expanduser().resolve()
        return cls(
            dir=base,
            socket=socket_path(base),
            lock=base / "owner.lock",
            start_lock=base / "owner.start.lock",
            info=base / "owner.json",
            log=base / "owner.log",
        )


def socket_path(base: Path) -> Path:
    """``base/owner.sock``, or a short private path when that one is too long."""
    direct = base / "owner.sock"
    if len(os.fsencode(direct)) <= MAX_SOCKET_BYTES:
        return direct
    digest = hashlib.sha256(os.fsencode(base)).hexdigest()[:24]
    return private_runtime_dir() / f"{digest}.sock"


def private_runtime_dir() -> Path:
    """A directory only this uid can enter: ``$XDG_RUNTIME_DIR/smriti`` when that is
    set, else ``/tmp/smriti-{uid}``; created with mode 0700, refused if another user
    owns it or it is a symlink (someone could otherwise plant a socket there)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    parent = Path(runtime) if runtime else Path(tempfile.gettempdir())
    path = parent / ("smriti" if runtime else f"smriti-{os.getuid()}")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise ConfigError(f"cannot create the private socket directory {path}: {exc}") from exc
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path} is not a directory; remove it so Smriti can create one")
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(
            f"{path} belongs to another user or is open to others (mode "
            f"{stat.S_IMODE(info.st_mode):o}); remove it so Smriti can create a private one"
        )
    return path
