"""One user's memory as the MCP tools and the CLI use it, in this process or another.

``open_service`` decides: a store that only one process at a time may open (embedded
Kùzu) is reached through its owner process (``smriti.owner.client``), unless
``SMRITI_OWNER=off``; every other store is opened here, as before.
"""

from __future__ import annotations

import dataclasses
import socket
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from smriti import requests
from smriti.config import validate_user
from smriti.model import new_id
from smriti.owner import ops
from smriti.progress import ProgressArg
from smriti.requests import CorrectRequest, Request, StatsRequest

if TYPE_CHECKING:
    from collections.abc import Callable

    from smriti.config import Settings
    from smriti.engine import Engine


class Service:
    """One user's memory, asked one typed request at a time (``smriti.requests``).

    Results are the JSON-ready dicts the MCP tools return; errors are Smriti errors.
    Methods may be called from several threads at once.
    """

    settings: Settings
    user: str
    #: Whether the memory is in another process (the store's owner).
    remote: bool = False

    def run(self, request: Request, progress: ProgressArg = None) -> Any:
        """Run ``request``; ``progress`` as long operations accept it (``smriti.progress``:
        None draws a line on a terminal, False nothing).

        A correction without a new id gets one here, so that a request sent again
        after an owner died corrects once (as a store's id does). The answer to a
        StatsRequest names the owner process and how many processes are attached,
        when there is one.
        """
        if isinstance(request, CorrectRequest) and request.new_id is None:
            request = dataclasses.replace(request, new_id=new_id())
        result = self.send(request, progress)
        if isinstance(request, StatsRequest):
            result = dict(result)
            status = self.owner_status()
            if status is not None:
                result["owner_pid"] = status["pid"]
                result["attached_processes"] = len(status["clients"])
        return result

    def call(self, op: str, args: Mapping[str, Any], progress: ProgressArg = None) -> Any:
        """Run the request whose owner-protocol form is ``op`` and ``args``
        (``smriti.requests.decode``); InvalidInput for an unknown ``op``."""
        return self.run(requests.decode(op, args, self.settings), progress)

    def send(self, request: Request, progress: ProgressArg) -> Any:
        """Run ``request`` where the memory is (this process, or its owner)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the memory (close the engine, or leave the owner)."""

    def owner_status(self) -> dict[str, Any] | None:
        """The owner process and who is attached; None when this process owns the store."""
        return None

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

    def send(self, request: Request, progress: ProgressArg) -> Any:
        """Run ``request`` on the engine in this thread."""
        return ops.run(self.engine, request, progress)

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
