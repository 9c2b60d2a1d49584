"""``smriti doctor``'s engine line: which embedded engine the store uses, why, the old
files a move left, and whether a move to another engine is available."""

from __future__ import annotations

from typing import Any

from smriti.config import Settings
from smriti.doctor.checks import Check, ok
from smriti.plugins import Registry
from smriti.store_engine import AUTO, backend_class, read_engine_record


def engine_check(registry: Registry, settings: Settings) -> Check | None:
    """The engine line, or None for a backend that keeps no store in the user's
    directory (a server)."""
    cls = backend_class(registry, settings)
    if not cls.store_files:
        return None
    user_dir = settings.user_dir()
    exists = _has_store(cls, user_dir)
    others = [c for c in registry.unique("backend") if c.store_files and c is not cls]
    kept = [c.name for c in others if _has_store(c, user_dir)]
    detail = f"{cls.name} ({_why(settings, user_dir, exists)})"
    if kept:
        old = ", ".join(f"{n} ({_files(c)})" for n, c in _named(others, kept))
        detail += f"; moved from {', '.join(kept)}, whose files are kept: {old}"
    targets = [c.name for c in others if getattr(c, "preference", 0) > 0 and c.name not in kept]
    if exists and targets:
        moves = " or ".join(f"smriti migrate --to {n}" for n in targets)
        return ok("engine", f"{detail}; a move is available: {moves}")
    return ok("engine", detail)


def _why(settings: Settings, user_dir: Any, exists: bool) -> str:
    if settings.db_type != AUTO:
        return "DB_TYPE"
    if read_engine_record(user_dir) is not None:
        return "moved here by smriti migrate"
    if exists:
        return "the engine that made this store"
    return "no store yet: a new store gets the preferred engine installed"


def _has_store(cls: type[Any], user_dir: Any) -> bool:
    return any((user_dir / name).exists() for name in cls.store_files)


def _files(cls: type[Any]) -> str:
    return ", ".join(f"{name}*" for name in cls.store_files)


def _named(classes: list[type[Any]], names: list[str]) -> list[tuple[str, type[Any]]]:
    return [(c.name, c) for c in classes if c.name in names]
