"""Temporal contiguity: a memory follows the one its user stored just before it.

People recall what happened next to a cued memory; an answer is often the turn after
the question that names the topic. Each new memory gets a ``follows`` association to
the previous memory the engine stored for its user, when that one is at most
``CONTIGUITY_SECONDS`` old (one edge per pair: a new memory already associated with the
previous one keeps that association instead). Recall reads these edges during its first
hop and lets a strong match raise the memories just before and after it
(``smriti.engine.recall``, ``smriti.engine.fusion``).

The previous memory is kept in the engine, not the store: after a restart the first
memory stored starts a new run. A previous memory deleted in between leaves an edge to
a missing target, which every backend skips (storage conformance suite).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

#: The association relation of "stored just after".
FOLLOWS = "follows"


class Timeline:
    """The last memory stored for one user, and when."""

    def __init__(self, window_seconds: int) -> None:
        self.window = timedelta(seconds=window_seconds)
        self._lock = threading.Lock()
        self._last: tuple[str, datetime] | None = None

    def advance(self, memory_id: str, now: datetime) -> str | None:
        """Record ``memory_id`` as stored at ``now``; return the memory it follows, if
        the previous one is recent enough (and contiguity is on)."""
        if self.window.total_seconds() <= 0:
            return None
        with self._lock:
            last, self._last = self._last, (memory_id, now)
        if last is None or last[0] == memory_id or now - last[1] > self.window:
            return None
        return last[0]

    def forget(self, memory_id: str) -> None:
        """A deleted memory starts no run."""
        with self._lock:
            if self._last is not None and self._last[0] == memory_id:
                self._last = None
