"""Whether the store is private on disk, and whether its directory has one spelling.

Doctor only looks: it never changes a mode or renames a directory (Smriti does both
when it next opens the store, see ``smriti.store_dir``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from smriti.config import Settings
from smriti.doctor.checks import Check, fail, ok, warn
from smriti.private import loose
from smriti.store_dir import other_spellings

#: Loose paths named in the report; the rest are counted.
SHOWN = 5


def privacy_checks(settings: Settings) -> list[Check]:
    """``privacy``: the modes of STORAGE_LOCATION, the user's store and the API key file;
    ``store name`` when a store under another spelling of the user's name exists."""
    location = settings.storage_location.expanduser()
    user_dir = location / settings.accessing_user
    checks = [_modes(location, user_dir, settings)]
    spelt = other_spellings(location, settings.accessing_user)
    if spelt:
        checks.append(_spelling(spelt, user_dir))
    return checks


def _modes(location: Path, user_dir: Path, settings: Settings) -> Check:
    from smriti.auth.keys import keys_file

    if not user_dir.exists():
        return ok("privacy", f"nothing written yet in {user_dir} (made private: 0700 / 0600)")
    found = _loose_location(location) + loose(user_dir)
    keys = keys_file(settings)
    if keys.is_file():
        found += loose(keys)
    if not found:
        return ok("privacy", f"{user_dir} is private: no group or other permission on anything")
    shown = ", ".join(f"{p} ({_mode(p)})" for p in found[:SHOWN])
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return warn(
        "privacy",
        f"loose: {len(found)} paths other users may read or enter: {shown}{more}",
        f"Smriti makes them private when it next opens the store; or now: chmod -R go= {user_dir}",
    )


def _loose_location(location: Path) -> list[Path]:
    """STORAGE_LOCATION itself when others may list it (user names show) and it is ours
    to tighten (not a shared, sticky directory such as /tmp)."""
    try:
        info = os.lstat(location)
    except OSError:
        return []
    shared = info.st_mode & stat.S_ISVTX or info.st_uid != getattr(os, "getuid", lambda: 0)()
    return [location] if info.st_mode & 0o077 and not shared else []


def _spelling(spelt: list[Path], user_dir: Path) -> Check:
    names = ", ".join(str(p) for p in spelt)
    if user_dir.exists() and not any(_same(p, user_dir) for p in spelt):
        return fail(
            "store name",
            f"two stores for one user: {names} and {user_dir} (names are case-insensitive)",
            f"keep one: move it to {user_dir}, or merge with `smriti export` and `smriti import`",
        )
    if len(spelt) > 1:
        return fail(
            "store name",
            f"several stores for one user: {names}",
            f"keep one and move it to {user_dir}",
        )
    return warn(
        "store name",
        f"{spelt[0]} was made under a mixed-case user name",
        f"Smriti renames it to {user_dir} when it next opens the store",
    )


def _mode(path: Path) -> str:
    try:
        return f"{stat.S_IMODE(os.lstat(path).st_mode):04o}"
    except OSError:
        return "gone"


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
