"""Purge: forget memories and erase every copy Smriti controls, the backups' history too.

``forget`` deletes a memory and erases it from the store's files before it returns
(``StorageBackend.erase_deleted``). Its backup still holds it: the next sync pushes a
snapshot without it, but the remote keeps every snapshot pushed before (the git
branch's history, an S3 bucket's object versions). ``purge`` goes further:

1. forget the memory (or accept one already forgotten here: its forget tombstone);
2. sync, so the remote's current snapshot no longer holds it (and carries the
   tombstone, so that another machine's sync deletes it too);
3. ask the backup provider to remove it from every older snapshot on the remote
   (``BackupProvider.purge``).

Copies outside Smriti's reach stay: other clones of a git remote, a server's
unreachable objects until its garbage collection, exports written earlier. The
result says so.

A correction with ``purge`` forgets every earlier version of the memory (the chain's
ids stay in the new version's ``supersedes`` and in the tombstones; no text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from smriti import validation
from smriti.engine import versions
from smriti.errors import BackupError, NotFound
from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.engine.core import Engine
    from smriti.model import Engram

log = get_logger(__name__)

#: What a purge cannot reach, in every answer.
WARNING = (
    "copies outside this store and its backup remote are not erased: other clones of a "
    "git remote, a server's unreachable objects until it collects them, and exports "
    "written earlier keep the text"
)


def delete_forgotten(engine: Engine, keys: Sequence[str]) -> list[Engram]:
    """Delete the memories ``keys`` that exist, each with a forget tombstone (ids only),
    without erasing yet (the caller erases once); returns those deleted."""
    from smriti.portable import tombstones

    found = engine.backend.get_engrams(list(keys), embeddings=False)
    if not found:
        return []
    ids = [e.id for e in found]
    with tombstones.LOCK:  # as Engine.forget: the tombstones first
        tombstones.record(engine.backend, [tombstones.forgotten(i) for i in ids])
        engine.backend.delete_engrams(ids)
    engine.forgotten_locally(ids)
    return found


def purge_versions(engine: Engine, new_id: str) -> list[str]:
    """After a correction: forget and erase every version before ``new_id``; returns
    their ids."""
    current = versions.fetch(engine, new_id, "purge the versions of")
    older = [v.id for v in versions.chain(engine, current) if v.id != current.id]
    with engine.writes.shared():
        deleted = delete_forgotten(engine, older)
        engine.erase()
    log.info("corrected with purge: earlier versions erased", memory_id=new_id,
             versions=len(deleted))  # fmt: skip
    return [e.id for e in deleted]


def purge(engine: Engine, memory_id: object) -> dict[str, Any]:
    """Forget ``memory_id``, erase it here, and remove it from the backup's history.

    NotFound when the memory neither exists nor was forgotten here. BackupError when
    the remote cannot be purged (the memory is forgotten and erased locally by then).
    """
    key = validation.memory_id(memory_id, "purge")
    with engine.writes.shared():
        deleted = delete_forgotten(engine, [key])
        if not deleted and not _was_forgotten(engine, key):
            raise NotFound(f"no memory with id {key!r} for user {engine.user!r}")
        engine.erase()
    out: dict[str, Any] = {
        "id": key,
        "forgotten_now": bool(deleted),
        "erased": True,
        "backup": engine.backup.name,
        "warning": WARNING,
    }
    if engine.backup.name != "none":
        try:
            engine.sync()  # the current snapshot without it, with its tombstone
            out["backup_purge"] = engine.backup.purge([key])
        except BackupError as exc:
            raise BackupError(
                f"memory {key} is forgotten and erased from this store, but not yet from "
                f"the backup: {exc}. Run `smriti purge {key}` again once that is fixed"
            ) from exc
    log.info("memory purged", memory_id=key, backup=engine.backup.name)
    return out


def _was_forgotten(engine: Engine, key: str) -> bool:
    from smriti.portable import tombstones

    stone = tombstones.load(engine.backend).get(key)
    return stone is not None and stone.kind == tombstones.FORGET
