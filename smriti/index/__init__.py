"""The retrieval layer: a working set in memory for backends that are their store's only
writer (``StorageBackend.sole_writer``).

- ``working_set`` — ``WorkingSet``: engram rows and vectors, cues, EncodedBy and
  AssociatedWith adjacency, the lexical index and the listing order; answers the storage
  contract's reads.
- ``indexed`` — ``IndexedBackend``: wraps a backend, loads its working set in the
  background, routes reads to it and applies every committed write to it.
- ``vectors`` (exact cosine with an int8 pre-scan), ``text`` (BM25 and its analyzer),
  ``graph`` (rows and adjacency), ``packed`` (adjacency kept in arrays until touched),
  ``ranking`` (cue members by importance), ``recency`` (list order), ``snapshot`` (saved
  at close and when idle, loaded at the next open), ``budget``
  (``SMRITI_WORKING_SET_MB`` across users).
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from smriti.backend import StorageBackend
    from smriti.config import Settings


def wanted(settings: Settings, backend: StorageBackend) -> bool:
    """Whether ``backend`` gets a working set: ``SMRITI_WORKING_SET`` is ``on``, or
    ``auto`` and the backend is its store's only writer; and the budget is not 0
    (``Settings.working_set_for``, which also decides ``BackendOptions.working_set``)."""
    return settings.working_set_for(backend.sole_writer)


def wrap(settings: Settings, backend: StorageBackend, background: bool = True) -> StorageBackend:
    """``backend`` behind an ``IndexedBackend`` when it gets a working set (``wanted``).

    A store opened without one drops its working set's snapshot: writes made now would
    not reach it, and the store's stamp could not say so."""
    snapshot = settings.user_dir(backend.user) / "working-set" if backend.sole_writer else None
    if not wanted(settings, backend):
        if snapshot is not None and snapshot.exists():
            shutil.rmtree(snapshot, ignore_errors=True)
        return backend
    from smriti.index.indexed import IndexedBackend

    # Only a store nothing else can open keeps a snapshot: a server database another
    # program might have changed meanwhile is always loaded from the database.
    return IndexedBackend(
        backend, settings.working_set_mb, background=background, snapshot_dir=snapshot
    )
