"""A user's store directory, made ready before anything opens it.

``prepare_store`` is called before a store is opened (by ``open_service`` before an
owner is reached, and by ``Engine.open``), and does two things:

- **One person, one store.** User names are canonical (``smriti.config.canonical_user``:
  NFKC, case-folded). A store made by an older version under a mixed-case name
  (``{STORAGE_LOCATION}/Alice/``) is renamed to the canonical one (``alice/``), with one
  log line, when no ``alice/`` exists; when both exist it refuses with an error naming
  both (never silently picking one), and it refuses while an owner process still
  holds the old directory.
- **Private on disk.** STORAGE_LOCATION and the user's directory lose any group or
  other permission (``smriti.private.tighten``, over the whole tree when the directory
  or an entry directly in it is loose), with one log line when anything changed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from smriti.config import USER_RE, canonical_user, validate_user
from smriti.errors import ConfigError
from smriti.logs import get_logger
from smriti.private import tighten_logged

log = get_logger(__name__)

OWNER_LOCK = "owner.lock"


def prepare_store(location: Path, user: str) -> Path:
    """The directory of ``user``'s store under ``location`` (STORAGE_LOCATION), an older
    mixed-case spelling adopted and both made private when they exist. Creates nothing.

    Raises ConfigError when two spellings of the name both have a store, or an owner
    process still holds the old spelling's store."""
    location = location.expanduser()
    user = validate_user(user)
    target = adopt_spelling(location, user)
    _tighten_location(location)
    if target.is_dir() and _loose_at_top(target):
        tighten_logged(target, f"the store of user {user!r}")
    return target


def _loose_at_top(user_dir: Path) -> bool:
    """Whether the store or an entry directly in it is loose: the cheap test (a dozen
    entries) before the whole tree is walked (a git backup's thousands of objects,
    about 25 µs each). What Smriti writes deeper is created private (private_dir,
    open_private, git with umask 077); what a native engine makes under a looser umask
    (Kùzu's WAL, say) lies at the top; and an older store is loose at the top too."""
    try:
        entries = [user_dir, *(user_dir / name for name in os.listdir(user_dir))]
    except OSError:
        return False
    for path in entries:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o077:
            return True
    return False


def other_spellings(location: Path, user: str) -> list[Path]:
    """Directories under ``location`` whose name is another spelling of ``user``
    (``Alice`` for ``alice``); on a case-insensitive file system, the one directory."""
    try:
        names = os.listdir(location)
    except OSError:  # missing, not a directory, or unreadable: nothing to adopt
        return []
    return sorted(
        location / name
        for name in names
        if name != user and _spelling_of(name) == user and (location / name).is_dir()
    )


def adopt_spelling(location: Path, user: str) -> Path:
    """``location / user``, after renaming a store made under another spelling of the
    name to it (see the module docstring)."""
    target = location / user
    legacy = other_spellings(location, user)
    if not legacy:
        return target
    same = [p for p in legacy if target.exists() and _same(p, target)]
    if same:  # a case-insensitive file system: one directory, spelt the old way
        return _rename(same[0], target, user)
    if target.exists() or len(legacy) > 1:
        found = ", ".join(str(p) for p in [*legacy, *([target] if target.exists() else [])])
        raise ConfigError(
            f"user {user!r} has more than one store: {found}. User names are no longer "
            f"case-sensitive, so these are one person's; keep one (move it to {target}), "
            "or merge them with `smriti export` from one and `smriti import` into the other"
        )
    return _rename(legacy[0], target, user)


def _rename(old: Path, target: Path, user: str) -> Path:
    _refuse_if_running(old)
    try:
        os.rename(old, target)
    except FileNotFoundError:  # another process adopted it first
        if not target.is_dir():
            raise
        return target
    except OSError as exc:
        raise ConfigError(
            f"the store {old} (user names are now lower case) cannot be renamed to "
            f"{target}: {exc.strerror or exc}; rename it yourself"
        ) from None
    log.warning(
        "store moved to the canonical spelling of its user name",
        user=user,
        old=str(old),
        new=str(target),
    )
    return target


def _refuse_if_running(old: Path) -> None:
    """ConfigError when a process holds ``old``'s owner lock (a Smriti of an older
    version still serving that store): renaming under it would split the store."""
    lock = old / OWNER_LOCK
    if not lock.exists():
        return
    try:
        import fcntl
    except ImportError:  # no flock here (Windows): no owner processes either
        return
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ConfigError(
            f"an owner process still serves {old}; stop it (for example with `kill` on "
            f"the pid in {old / 'owner.json'}), then start Smriti again so that the "
            f"store moves to its lower-case name"
        ) from None
    finally:
        os.close(fd)  # releases the lock if we took it


def _tighten_location(location: Path) -> None:
    """Make STORAGE_LOCATION itself 0700 (not its other users' stores, each tightened
    when opened) unless it is shared: owned by another uid, or sticky like /tmp."""
    try:
        info = os.lstat(location)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & stat.S_ISVTX:
        return
    if not info.st_mode & 0o077 or info.st_uid != getattr(os, "getuid", lambda: info.st_uid)():
        return
    os.chmod(location, stat.S_IMODE(info.st_mode) & ~0o077)
    log.warning("STORAGE_LOCATION was listable by other users; made private", path=str(location))


def _spelling_of(name: str) -> str | None:
    canonical = canonical_user(name)
    return canonical if USER_RE.fullmatch(canonical) else None


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


__all__ = ["adopt_spelling", "other_spellings", "prepare_store"]
