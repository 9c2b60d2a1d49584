"""Writes a backend runs after the call that asked for them has returned.

``StorageBackend.strengthen_engrams`` may be persisted late, provided every read through
the backend sees the new values at once and ``close`` persists them. A server backend
uses :class:`DeferredWrites` for that: recall's access strengthening is a write
transaction (a commit, a log flush), and the engine waits for nothing it returns, so the
write runs on one background thread while the next call proceeds. The backend calls
:meth:`DeferredWrites.drain` before any read that returns what such a write changes, and
before any other write (so the writes of one backend keep their order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from smriti.logs import get_logger

log = get_logger(__name__)


class DeferredWrites:
    """One background thread running submitted writes in order.

    A write that fails is logged and dropped: only access statistics are written this
    way, and the contract allows losing those (as a crash before they were persisted
    would), never a memory.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._last: Future[None] | None = None

    def submit(self, write: Callable[[], None]) -> None:
        """Run ``write`` after every write submitted before it."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=self.name)
            self._last = self._executor.submit(self._run, write)

    def _run(self, write: Callable[[], None]) -> None:
        try:
            write()
        except Exception as exc:  # logged: a failed access update must not fail a later call
            log.warning("deferred write failed", backend=self.name, error=str(exc))

    def drain(self) -> None:
        """Wait until every write submitted so far has finished."""
        last = self._last
        if last is not None and not last.done():
            last.result()

    def close(self) -> None:
        """Finish every submitted write and stop the thread; the object stays usable."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
