"""What export, import, merge and the hash are given: an opened store, or a bare backend.

The portable code needs four things of an opened engine: its storage backend, the
embedder that made its vectors, its SMRITI_SECRETS policy, and the flag that tells the
next backup the store changed. It names them in ``OpenedStore`` rather than importing
the Engine, so ``smriti.portable`` stays below ``smriti.engine``: the engine's backups
and forgets use the portable format, never the other way round (an import-linter
contract in pyproject.toml keeps it so). ``smriti.engine.Engine`` is an OpenedStore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from smriti.backend import StorageBackend

if TYPE_CHECKING:
    import threading

    from smriti.embedding import Embedder

#: The policy of a bare backend, which has no settings (the default of SMRITI_SECRETS).
DEFAULT_SECRETS = "redact"


class SecretsPolicy(Protocol):
    """Settings as the portable code reads them: only the SMRITI_SECRETS mode."""

    @property
    def secrets(self) -> str:
        """``redact``, ``refuse`` or ``allow`` (see ``smriti.secrets``)."""
        ...


class OpenedStore(Protocol):
    """An opened engine as the portable code sees it (``smriti.engine.Engine`` is one)."""

    @property
    def backend(self) -> StorageBackend:
        """The store the records are read from or written to."""
        ...

    @property
    def embedder(self) -> Embedder:
        """The embedder of the store's vectors (an import re-embeds with it)."""
        ...

    @property
    def settings(self) -> SecretsPolicy:
        """The settings holding the store's SMRITI_SECRETS policy."""
        ...

    @property
    def dirty(self) -> threading.Event:
        """Set when the store changed, so that the next backup pushes it."""
        ...


#: An opened store, or a bare backend (vectors are then taken as they are).
Source = OpenedStore | StorageBackend


def source_of(obj: Source) -> tuple[StorageBackend, Embedder | None]:
    """The backend of ``obj``, and its embedder (None for a bare backend)."""
    if isinstance(obj, StorageBackend):
        return obj, None
    return obj.backend, obj.embedder


def secrets_policy(obj: Source) -> str:
    """The SMRITI_SECRETS policy of an opened store, or the default for a bare backend."""
    if isinstance(obj, StorageBackend):
        return DEFAULT_SECRETS
    return str(obj.settings.secrets)


def mark_changed(obj: Source) -> None:
    """Tell an opened store's next backup that the store changed (a bare backend has
    no backup to tell)."""
    if not isinstance(obj, StorageBackend):
        obj.dirty.set()
