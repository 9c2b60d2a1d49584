"""Private on disk: what Smriti writes is readable by its owner only.

Every directory Smriti creates is mode 0700 and every file 0600, whatever the umask.
Three layers make that hold:

- Files and directories Smriti writes itself are created with those modes
  (``private_dir``, ``open_private``, ``make_private``), so the umask cannot loosen them.
- Files that native engines and tools create on their own (Kùzu's database, WAL and
  lock files, git's objects) cannot be given a mode. The ``smriti`` command therefore
  sets the process umask to 077 once at startup (``restrict_umask``), before any thread
  starts: the umask is process-wide and not thread-safe to flip around a call, so it is
  set once and never toggled. The git backup runs git with umask 077 as well.
- A library user's process keeps its own umask; for them, and for stores made by older
  versions, ``tighten`` strips group and other permissions from the whole user directory
  when a store is opened and anything at its top is loose (``smriti.store_dir``), and
  the user directory is 0700 so nothing in it can be reached by another user in between.

Plugins that write into a store use these helpers too (``from smriti.private import
private_dir, open_private``).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600
#: The umask that leaves group and other no permission at all.
PRIVATE_UMASK = 0o077
#: The permission bits nobody but the owner may hold.
OTHERS = 0o077

_FLAGS = {
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}


def restrict_umask() -> int:
    """Add 077 to the process umask (files created from now on are private); returns
    the previous umask. Call once at startup, before threads exist: ``os.umask`` is
    process-wide, and a umask flipped around one call would race with other threads."""
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    return old


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and any missing parents with mode 0700; returns it.

    ``Path.mkdir(parents=True)`` gives parents the umask's mode (often 0755); this gives
    every directory it creates 0700. A directory that already exists keeps its mode
    (``tighten`` is for the store's own tree)."""
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.exists() and probe.parent != probe:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:  # made meanwhile by another process
            continue
        os.chmod(directory, DIR_MODE)  # mkdir's mode is masked by the umask
    if not target.is_dir():
        raise NotADirectoryError(f"{target} is not a directory")
    return target


def open_private(path: str | os.PathLike[str], mode: str = "wb", **kwargs: Any) -> IO[Any]:
    """``open(path, mode)`` for writing (``w``, ``a`` or ``x``, binary or text, with
    ``+``), the file created, or an existing one changed, to mode 0600."""
    try:
        flags = _FLAGS[mode[0]]
    except (IndexError, KeyError):
        raise ValueError(f"open_private writes files; mode {mode!r} is not w, a or x") from None
    if "+" in mode:
        flags = (flags & ~os.O_WRONLY) | os.O_RDWR
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        _fchmod(fd)  # an existing file keeps its old mode otherwise
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def make_private(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` as an empty 0600 file, or set an existing file to 0600 (its
    content kept), before a library that takes a file name writes it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        _fchmod(fd)
    finally:
        os.close(fd)
    return Path(path)


def _fchmod(fd: int) -> None:
    if hasattr(os, "fchmod"):  # not on Windows, where modes mean little
        os.fchmod(fd, FILE_MODE)


def copy_private(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Copy the bytes of ``source`` to ``target``, which is made 0600 (``shutil.copy2``
    would copy the source's mode, ``copyfile`` take the umask's)."""
    with open(source, "rb") as src, open_private(target, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    return Path(target)


def loose(tree: str | os.PathLike[str]) -> list[Path]:
    """Entries under ``tree`` (itself included) that group or others may use, in walk
    order. Symbolic links are not followed and never counted (their mode means nothing)."""
    return [path for path, _mode in _walk_loose(Path(tree))]


def tighten(tree: str | os.PathLike[str]) -> list[Path]:
    """Remove group and other permissions from ``tree`` and everything under it; returns
    the paths changed. Owner bits are kept (a git hook stays executable, git's read-only
    objects stay read-only); entries owned by another uid are left alone."""
    changed: list[Path] = []
    for path, mode in _walk_loose(Path(tree)):
        try:
            os.chmod(path, mode & ~OTHERS)  # never a symlink: _walk_loose skips them
        except FileNotFoundError:  # removed meanwhile
            continue
        changed.append(path)
    return changed


def tighten_logged(tree: str | os.PathLike[str], what: str) -> int:
    """``tighten`` with one log line naming ``tree`` and the count when any entry was
    loose (a store made under a looser umask, or by an older version)."""
    changed = tighten(tree)
    if changed:
        from smriti.logs import get_logger  # here: the CLI imports this module at startup

        get_logger(__name__).warning(
            f"{what} was readable by other users; made private",
            path=os.fspath(tree),
            changed=len(changed),
        )
    return len(changed)


def _walk_loose(root: Path) -> Iterator[tuple[Path, int]]:
    uid = os.getuid() if hasattr(os, "getuid") else None
    for path in _entries(root):
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode) or (uid is not None and info.st_uid != uid):
            continue
        if info.st_mode & OTHERS:
            yield path, stat.S_IMODE(info.st_mode)


def _entries(root: Path) -> Iterator[Path]:
    if not root.exists():
        return
    yield root
    if not root.is_dir() or root.is_symlink():
        return
    for folder, dirs, files in os.walk(root, onerror=lambda exc: None):
        base = Path(folder)
        for name in dirs + files:
            yield base / name
