"""Recall's access strengthening, written to Kùzu after the recall returns.

Strengthening a recall's results is one statement matching each engram by primary key,
in its own transaction: about 8 ms of a 23 ms recall at 100k memories. The mirror, which
answers every engram read, takes the new values at once; a background thread then
writes the mirror's current values of every engram strengthened since its last write
(so a burst of recalls costs one write). Before any query of the store itself (``_q``)
and before ``close``, the backend waits for that write, so Kùzu never answers with
older values than the mirror. A crash in between loses only those access updates.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from smriti.logs import get_logger
from smriti.model import EngramUpdate
from smriti_backend_kuzu.codec import ts_in, ts_out
from smriti_backend_kuzu.mirror import FIELDS

if TYPE_CHECKING:
    from smriti_backend_kuzu.backend import KuzuBackend as _Self
else:
    _Self = object

log = get_logger(__name__)

#: The fields strengthening changes, and their positions in a mirror row.
STRENGTHENED = ("access_count", "last_accessed_at", "decay_factor")
_ACCESS_COUNT, _LAST_ACCESSED_AT, _DECAY_FACTOR = (FIELDS.index(f) for f in STRENGTHENED)


class StrengthenMixin(_Self):  # type: ignore[misc,valid-type]
    """``strengthen_engrams`` with the Kùzu write deferred to a background thread."""

    def _init_strengthening(self) -> None:
        self._strengthen_lock = threading.Lock()
        #: Ids strengthened in the mirror and not yet written (insertion-ordered set).
        self._strengthen_ids: dict[str, None] = {}
        #: True while a write of strengthened ids is under way.
        self._strengthen_writing = False
        self._strengthen_scheduled = False
        self._strengthener: ThreadPoolExecutor | None = None

    def strengthen_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Apply ``updates`` to the mirror now and to Kùzu on a background thread
        (without the mirror, i.e. with the caches off, at once)."""
        mirror = self.mirror
        if mirror is None:
            self.update_engrams(updates)
            return
        with self._strengthen_lock:
            for u in updates:
                for field in STRENGTHENED:
                    value = getattr(u, field)
                    if value is not None:
                        if field == "last_accessed_at":
                            value = ts_out(ts_in(value))  # as Kùzu stores it
                        mirror.update(u.id, field, value)
                self._strengthen_ids[u.id] = None
            schedule = not self._strengthen_scheduled
            self._strengthen_scheduled = True
            if schedule:
                if self._strengthener is None:
                    self._strengthener = ThreadPoolExecutor(
                        1, thread_name_prefix="smriti-kuzu-strengthen"
                    )
                self._strengthener.submit(self._strengthen_in_background)

    def strengthening_unsaved(self) -> bool:
        """Whether some strengthening is not yet in Kùzu (pending or being written)."""
        # Read in this order: the writer sets ``_strengthen_writing`` before it empties
        # ``_strengthen_ids``, so one of the two is seen set.
        return bool(self._strengthen_ids) or self._strengthen_writing

    def flush_strengthening(self) -> None:
        """Write pending strengthening now; wait for a write under way."""
        with self._write_lock:
            with self._strengthen_lock:
                if not self._strengthen_ids:  # also when called from within the write
                    return
                self._strengthen_writing = True
                ids = list(self._strengthen_ids)
                self._strengthen_ids.clear()
            try:
                mirror = self.mirror
                if mirror is None:
                    return
                with mirror.lock:
                    rows = [(key, mirror.rows.get(key)) for key in ids]
                updates = [
                    EngramUpdate(
                        key,
                        access_count=row[_ACCESS_COUNT],  # type: ignore[arg-type]
                        last_accessed_at=row[_LAST_ACCESSED_AT],  # type: ignore[arg-type]
                        decay_factor=row[_DECAY_FACTOR],  # type: ignore[arg-type]
                    )
                    for key, row in rows
                    if row is not None  # deleted since
                ]
                if updates:
                    self.write_updates(updates, to_mirror=False)
            finally:
                self._strengthen_writing = False

    def _strengthen_in_background(self) -> None:
        with self._strengthen_lock:
            self._strengthen_scheduled = False
        try:
            self.flush_strengthening()
        except Exception as exc:  # the mirror keeps the values until the next open
            log.error("access strengthening not saved", path=str(self.path), error=str(exc))

    def _stop_strengthening(self) -> None:
        """Shut the background thread down (after ``close`` flushed what was pending)."""
        with self._strengthen_lock:
            strengthener, self._strengthener = self._strengthener, None
        if strengthener is not None:
            strengthener.shutdown(wait=True)
