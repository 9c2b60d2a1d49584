"""What the embedded graph backend keeps in memory of its store: cues and engram ids.

Kùzu has no secondary index to find a cue by name, and a join by ``UNWIND`` scans a
whole table, so every cue (by normalised name and by id, its embedding in a vector
cache) and the id of every stored engram are loaded at open and kept in step by each
committed write. A new memory's cues are merged on their names, and its id and its
edges' targets are checked, without a Kùzu query.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np

from smriti.backend import BackendError, Cue, VectorCache, as_vector, normalise_cue_name


class CueMap:
    """Every stored cue, the ids of every stored engram, and the embeddings' width."""

    def __init__(self) -> None:
        #: The cues' embeddings, searched by ``cue_vector_search``.
        self.cache = VectorCache()
        #: Every cue without its embedding, by normalised name and by id.
        self.by_key: dict[str, Cue] = {}
        self.by_id: dict[str, Cue] = {}
        self.lock = threading.RLock()
        #: The ids of every stored engram (queued ones included); None until loaded.
        self.engram_ids: set[str] | None = None
        #: The width of the stored embeddings (None while none is stored).
        self.dims: int | None = None

    def remember(self, cues: Iterable[Cue]) -> None:
        """Add committed cues to the name map and their vectors to the cue cache."""
        with self.lock:
            rows = []
            for cue in cues:
                key = normalise_cue_name(cue.name)
                old = self.by_key.get(key)
                if old is not None and old.id != cue.id:
                    self.cache.remove([old.id])
                    self.by_id.pop(old.id, None)
                replaced = self.by_id.get(cue.id)
                if replaced is not None and normalise_cue_name(replaced.name) != key:
                    self.by_key.pop(normalise_cue_name(replaced.name), None)
                bare = Cue(cue.id, cue.name, cue.cue_type)
                self.by_key[key] = bare
                self.by_id[cue.id] = bare
                if cue.embedding is not None:
                    rows.append((cue.id, cue.embedding, 0))
                else:
                    self.cache.remove([cue.id])
            self.cache.put_many(rows)

    def forget(self, ids: set[str]) -> None:
        """Drop deleted cues from the name map and the cue cache."""
        with self.lock:
            for cid in ids:
                cue = self.by_id.pop(cid, None)
                if cue is not None:
                    key = normalise_cue_name(cue.name)
                    if self.by_key.get(key) is cue:
                        del self.by_key[key]
            self.cache.remove(ids)

    def clear(self) -> None:
        """Forget every cue and engram id (the store closed, or is read again)."""
        with self.lock:
            self.cache.clear()
            self.by_key.clear()
            self.by_id.clear()
        self.engram_ids = None

    def stored(self, cue: Cue) -> Cue:
        """A cue of the name map with its embedding."""
        return Cue(cue.id, cue.name, cue.cue_type, self.cache.vector(cue.id))

    def every(self) -> list[Cue]:
        """Every cue (without embeddings), as it is now."""
        with self.lock:
            return list(self.by_id.values())

    def check_dims(self, vector: np.ndarray) -> None:
        """Raise BackendError when ``vector`` does not match the stored embeddings' width."""
        if self.dims is not None and vector.shape[0] != self.dims:
            raise BackendError(
                f"embedding has {vector.shape[0]} dimensions but this store holds "
                f"{self.dims}-dimensional vectors; re-embed or use a new STORAGE_LOCATION"
            )

    def resolve(self, cues: Sequence[Cue]) -> tuple[list[Cue], list[Cue]]:
        """(cues as stored for this memory, the new ones to create), merged by name."""
        stored: dict[str, Cue] = {}
        new: list[Cue] = []
        for cue in cues:
            key = normalise_cue_name(cue.name)
            if key in stored:
                continue
            existing = self.by_key.get(key)
            if existing is None:
                emb = None if cue.embedding is None else as_vector(cue.embedding)
                if emb is not None:
                    self.cache.check_dims(emb)
                existing = Cue(cue.id, cue.name, cue.cue_type, emb)
                new.append(existing)
            else:
                existing = self.stored(existing)
            stored[key] = existing
        return list(stored.values()), new
