"""The retrieval layer: a working set in memory for backends that are their store's only
writer (``StorageBackend.sole_writer``).

- ``working_set`` — ``WorkingSet``: engram rows and vectors, cues, EncodedBy and
  AssociatedWith adjacency, the lexical index and the listing order; answers the storage
  contract's reads.
- ``indexed`` — ``IndexedBackend``: wraps a backend, loads its working set in the
  background, routes reads to it and applies every committed write to it.
- ``text`` (BM25 over ``smriti.backend.text``'s terms), ``graph`` (rows and adjacency),
  ``packed`` (adjacency kept in arrays until touched), ``ranking`` (cue members by
  importance), ``recency`` (list order), ``snapshot`` (saved at close and when idle,
  loaded at the next open), ``budget`` (``SMRITI_WORKING_SET_MB`` across users).

Vectors are searched by ``smriti.backend.VectorCache`` (exact cosine with an int8
pre-scan), which embedded backends share. The engine decides whether a backend gets a
working set and passes that in (``wrap``); this package imports only ``smriti`` and
``smriti.backend``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from smriti.backend import StorageBackend


def wrap(
    backend: StorageBackend,
    *,
    enabled: bool,
    budget_mb: int,
    user_dir: Path,
    background: bool = True,
) -> StorageBackend:
    """``backend`` behind an ``IndexedBackend`` when the engine decided it gets a working
    set (``enabled``: ``Settings.working_set_for``, also ``BackendOptions.working_set``),
    sharing the ``budget_mb`` of ``SMRITI_WORKING_SET_MB``; ``user_dir`` is the user's
    directory under ``STORAGE_LOCATION``.

    A store opened without one drops its working set's snapshot: writes made now would
    not reach it, and the store's stamp could not say so."""
    snapshot = user_dir / "working-set" if backend.sole_writer else None
    if not enabled:
        if snapshot is not None and snapshot.exists():
            shutil.rmtree(snapshot, ignore_errors=True)
        return backend
    from smriti.index.indexed import IndexedBackend

    # Only a store nothing else can open keeps a snapshot: a server database another
    # program might have changed meanwhile is always loaded from the database.
    return IndexedBackend(backend, budget_mb, background=background, snapshot_dir=snapshot)
