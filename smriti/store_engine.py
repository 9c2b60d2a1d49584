"""Which storage backend a store uses: ``DB_TYPE=auto`` and the record a move leaves.

With ``DB_TYPE=auto`` (the default) a store keeps the engine that made it, and a new
store gets the preferred engine installed. The core names no engine: a backend declares
the files that show one of its stores (``StorageBackend.store_files``) and how much a new
store should prefer it (``StorageBackend.preference``; 0 = never chosen automatically).
``smriti migrate`` records the engine a store was moved to in ``engine.json`` in the
user's directory, so the moved store opens with it while the old files stay beside it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from smriti.errors import ConfigError, UnknownBackendError
from smriti.private import open_private

if TYPE_CHECKING:
    from smriti.backend import StorageBackend
    from smriti.config import Settings
    from smriti.plugins import Registry

#: The ``DB_TYPE`` value that lets the store and the installed backends decide.
AUTO = "auto"
#: The record, in ``{STORAGE_LOCATION}/{user}/``, of the engine a store was moved to.
ENGINE_RECORD = "engine.json"
#: Present in the user's directory while a move renames the new store's files into
#: place (``{name}`` is the target): those files are not a store yet.
MOVING_MARKER = "migrate-{name}.moving"


def backend_class(
    registry: Registry, settings: Settings, user: str | None = None
) -> type[StorageBackend]:
    """The backend class for ``user``'s store: ``DB_TYPE``, or under ``auto`` the
    recorded engine, the installed engine whose files are there, else the preferred."""
    if settings.db_type != AUTO:
        return registry.get("backend", settings.db_type, "DB_TYPE")
    return auto_backend(registry, settings.user_dir(user))


def auto_backend(registry: Registry, user_dir: Path) -> type[StorageBackend]:
    """The ``DB_TYPE=auto`` choice for the store in ``user_dir`` (see the module)."""
    recorded = read_engine_record(user_dir)
    if recorded is not None:
        return registry.get("backend", recorded, f"the engine recorded in {ENGINE_RECORD}")
    candidates = [c for c in registry.unique("backend") if getattr(c, "preference", 0) > 0]
    candidates.sort(key=lambda c: -c.preference)
    for cls in candidates:
        if (user_dir / MOVING_MARKER.format(name=cls.name)).exists():
            continue  # a move to it was cut short: the store is still the old one
        if any((user_dir / name).exists() for name in cls.store_files):
            return cls
    if not candidates:
        installed = ", ".join(sorted(registry.classes["backend"])) or "none"
        raise UnknownBackendError(
            f"DB_TYPE=auto: no embedded storage engine is installed (installed backends: "
            f"{installed}); install one with: pip install smriti-server, or set DB_TYPE"
        )
    return candidates[0]


def read_engine_record(user_dir: Path) -> str | None:
    """The ``DB_TYPE`` recorded for the store in ``user_dir``, None when none is."""
    path = user_dir / ENGINE_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):  # no store yet, or no directory
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{path} cannot be read ({exc}); it names the engine the store was moved to: "
            "fix it or delete it, and set DB_TYPE to the engine the store uses"
        ) from exc
    name = data.get("db_type") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path} names no engine (db_type): delete it and set DB_TYPE")
    return name


def write_engine_record(user_dir: Path, name: str) -> None:
    """Record that the store in ``user_dir`` uses the backend ``name`` (atomically)."""
    path = user_dir / ENGINE_RECORD
    scratch = path.with_name(path.name + ".tmp")
    with open_private(scratch, "w", encoding="utf-8") as out:
        out.write(json.dumps({"db_type": name}) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(scratch, path)
