"""One user's memory as the MCP tools and the CLI use it, in this process or another.

``open_service`` decides: a store that only one process at a time may open (embedded
Kùzu) is reached through its owner process (``smriti.owner.client``), unless
``SMRITI_OWNER=off``; every other store is opened here, as before.
"""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING, Any

from smriti.config import validate_user
from smriti.owner import ops
from smriti.progress import ProgressArg

if TYPE_CHECKING:
    from collections.abc import Callable

    from smriti.config import Settings
    from smriti.engine import Engine


class Service:
    """The operations of ``smriti.owner.ops`` on one user's memory.

    Results are the JSON-ready dicts the MCP tools return; errors are Smriti errors.
    Methods may be called from several threads at once.
    """

    settings: Settings
    user: str
    #: Whether the memory is in another process (the store's owner).
    remote: bool = False

    def call(self, op: str, args: dict[str, Any], progress: ProgressArg = None) -> Any:
        """Run ``op`` with ``args``; ``progress`` as long operations accept it."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the memory (close the engine, or leave the owner)."""

    def owner_status(self) -> dict[str, Any] | None:
        """The owner process and who is attached; None when this process owns the store."""
        return None

    def store(
        self,
        content: object,
        importance: object = 0.5,
        tags: object = None,
        source: object = None,
        occurred_at: object = None,
        origin: object = None,
        principal: object = None,
    ) -> dict[str, Any]:
        """Remember ``content``: the stored memory's summary, cues and associations.
        ``occurred_at`` (ISO 8601) dates an event stored after the fact; ``origin`` says
        who said it (``user``, ``agent``, ... ; None: ``agent``) and ``principal`` the
        authenticated caller storing it, if any."""
        args = {"content": content, "importance": importance, "tags": tags, "source": source}
        if occurred_at is not None:
            args["occurred_at"] = occurred_at
        if origin is not None:
            args["origin"] = origin
        if principal is not None:
            args["principal"] = principal
        return self.call("store", args)

    def recall(
        self,
        query: object = None,
        limit: object = 5,
        mode: object = "recall",
        memory_type: object = None,
        tags: object = None,
        tag_match: object = "any",
        since: object = None,
        until: object = None,
        include_superseded: object = False,
        cursor: object = None,
        origin: object = None,
    ) -> dict[str, Any]:
        """``results`` (tool-facing dicts), ``degraded``, ``warning`` and ``next_cursor``
        (list mode: pass it as ``cursor`` for the next page; None after the last one).

        The filters (``tags`` matching any or, with ``tag_match="all"``, every one;
        ``since`` <= created_at < ``until``, ISO 8601; old versions only with
        ``include_superseded``; ``origin``, exact or a prefix such as ``import:``) apply
        before the limit.
        """
        args = {
            "query": query,
            "limit": limit,
            "mode": mode,
            "memory_type": memory_type,
            "tags": tags,
            "tag_match": tag_match,
            "since": since,
            "until": until,
            "include_superseded": include_superseded,
            "cursor": cursor,
        }
        if origin is not None:
            args["origin"] = origin
        return self.call("recall", args)

    def get(self, memory_id: object) -> dict[str, Any]:
        """One memory by id: ``memory``, its ``cues``, ``associations`` and ``versions``
        (ids, oldest first). NotFound for an unknown or another user's id."""
        return self.call("get", {"memory_id": memory_id})

    def correct(
        self,
        memory_id: object,
        content: object,
        importance: object = None,
        tags: object = None,
        new_id: str | None = None,
        origin: object = None,
        principal: object = None,
        purge: bool = False,
    ) -> dict[str, Any]:
        """Replace a memory by a corrected version that supersedes it (the old one is
        kept, marked superseded): ``new_id``, ``superseded`` and the new ``memory``.
        With ``purge`` the earlier versions are forgotten and erased instead
        (``purged``: their ids).

        ``importance`` and ``tags`` of None keep the old version's. ``new_id`` is the new
        version's id, chosen here when not given so that a request sent again after an
        owner died corrects once (as a store's id does). ``origin`` None keeps the old
        version's; ``principal`` is the authenticated caller correcting it, if any.
        """
        from smriti.model import new_id as fresh_id

        args = {
            "memory_id": memory_id,
            "content": content,
            "importance": importance,
            "tags": tags,
            "new_id": new_id or fresh_id(),
        }
        if origin is not None:
            args["origin"] = origin
        if principal is not None:
            args["principal"] = principal
        if purge:
            args["purge"] = True
        return self.call("correct", args)

    def history(self, memory_id: object) -> dict[str, Any]:
        """The version chain of a memory: ``memory_id`` and ``versions``, oldest first."""
        return self.call("history", {"memory_id": memory_id})

    def update(
        self, memory_id: object, importance: object = None, tags: object = None
    ) -> dict[str, Any]:
        """Change a memory's importance and/or its whole tag list in place: ``memory``."""
        return self.call("update", {"memory_id": memory_id, "importance": importance, "tags": tags})

    def related(self, memory_id: object, limit: object = 10) -> dict[str, Any]:
        """Memories linked to one: ``memory_id`` and ``related`` (id, summary,
        relation, strength, via), best first."""
        return self.call("related", {"memory_id": memory_id, "limit": limit})

    def duplicates(
        self, threshold: object = None, limit: object = None, stale_days: object = None
    ) -> dict[str, Any]:
        """Groups of near-duplicate memories (``groups``, each with its ``memories``,
        newest first, and their closest ``similarity``) and ``stale`` ones, never
        recalled in ``stale_days``."""
        args = {"threshold": threshold, "limit": limit, "stale_days": stale_days}
        return self.call("duplicates", args)

    def merge(self, memory_id: object, memory_ids: object) -> dict[str, Any]:
        """Merge the memories ``memory_ids`` into ``memory_id``: the survivor
        (``memory``) and the ``merged`` ids, which are kept as superseded versions."""
        return self.call("merge", {"memory_id": memory_id, "memory_ids": memory_ids})

    def forget(self, memory_id: object) -> dict[str, Any]:
        """Delete a memory; the forgotten memory's id, summary, type and creation time."""
        return self.call("forget", {"memory_id": memory_id})

    def purge(self, memory_id: object) -> dict[str, Any]:
        """Forget a memory (or take one already forgotten), erase it from the store's
        files and remove it from every snapshot the backup keeps (``smriti.engine.purge``):
        ``id``, ``erased``, ``backup``, ``backup_purge`` and a ``warning``."""
        return self.call("purge", {"memory_id": memory_id})

    def consolidate(self, progress: ProgressArg = None) -> dict[str, Any]:
        """Run consolidation now; its report. ``progress``: a line on a terminal by
        default (see ``smriti.progress``)."""
        return self.call("consolidate", {}, progress)

    def sync(self, progress: ProgressArg = False) -> dict[str, Any]:
        """Push a backup now; its report. ``progress``: none by default (a command that
        stored something pushes quietly), else as for ``consolidate``."""
        return self.call("sync", {}, progress)

    def stats(self) -> dict[str, Any]:
        """Counts and components in use (and the owner process, when there is one)."""
        data = dict(self.call("stats", {}))
        status = self.owner_status()
        if status is not None:
            data["owner_pid"] = status["pid"]
            data["attached_processes"] = len(status["clients"])
        return data

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalService(Service):
    """The memory of an engine this process opened."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.settings = engine.settings
        self.user = engine.user

    def call(self, op: str, args: dict[str, Any], progress: ProgressArg = None) -> Any:
        """Run ``op`` on the engine in this thread."""
        return ops.run(self.engine, op, args, progress)

    def close(self) -> None:
        """Stop background work and close the engine (final backup included)."""
        self.engine.stop_background()
        self.engine.close()


def open_service(
    settings: Settings,
    kind: str,
    *,
    background: bool = False,
    attach_wait: float | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> Service:
    """The memory for ``settings``, for a process described by ``kind`` (shown by
    ``smriti doctor``, e.g. ``stdio server`` or ``cli recall``).

    ``background`` starts periodic consolidation and backup when this process opens
    the engine itself (servers do; one-shot commands do not). ``attach_wait``: reach
    an owner in the background and return after at most this many seconds (servers,
    so that they answer their client while a large store opens); None waits until it
    is reached. ``meanwhile`` is called once the memory is on its way (an owner is
    being reached or started in the background, or just before the engine opens here),
    for work that should overlap the wait. Raises what opening the store raises
    (ConfigError, BackendError, ...), in this process or the owner.
    """
    from smriti import validation

    # A file where the store's directory belongs is a ConfigError (one line), not an
    # OSError from deep inside the backend or the owner.
    validation.storage_dirs(settings.storage_location, settings.user_dir())
    # Before an owner's socket or lock is made in the user's directory: a store under
    # an older mixed-case spelling of the name is adopted first (smriti.store_dir).
    from smriti.store_dir import prepare_store

    prepare_store(settings.storage_location, settings.accessing_user)
    if uses_owner(settings):
        from smriti.owner.client import RemoteService

        if attach_wait is not None:
            return RemoteService.attach_soon(settings, kind, attach_wait, meanwhile)
        if meanwhile is not None:
            meanwhile()
        return RemoteService.connect(settings, kind)
    if meanwhile is not None:
        meanwhile()
    from smriti.engine import Engine

    engine = Engine.from_settings(settings)
    engine.open()
    if background:
        engine.start_background()
    return LocalService(engine)


def owner_supported() -> bool:
    """Whether this platform has what the owner needs: Unix sockets whose peer's uid
    can be read (Linux, macOS, the BSDs; not Windows)."""
    return hasattr(socket, "AF_UNIX") and sys.platform != "win32"


def uses_owner(settings: Settings) -> bool:
    """Whether processes reach this store through an owner process: the backend admits
    one process at a time, ``SMRITI_OWNER`` is not ``off``, and the platform can."""
    if settings.owner == "off" or not owner_supported():
        return False
    from smriti.plugins import Registry, create_plugin_manager
    from smriti.store_engine import backend_class

    validate_user(settings.accessing_user)
    pm, _ = create_plugin_manager(environ=settings.env or None)
    cls = backend_class(Registry(pm), settings)
    return bool(getattr(cls, "single_process", False))
