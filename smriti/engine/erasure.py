"""When forgotten memories are erased from the store's files (docs/storage.md, "Forget
erases").

Erasing costs the backend a rewrite that grows with the store: Kùzu rebuilds its whole
file (seconds at 10,000 memories, about 20 s at 100,000), and holds the store's other
writes meanwhile. Paying that on every forget would make an agent that tidies up ten
memories wait minutes, so forgets close together share one erase: a forget returns as
soon as the memory is deleted (no recall, get or export sees it any more), and the
erase runs ``SMRITI_ERASE_DELAY`` seconds after the first forget not yet erased, in the
background. ``close`` runs a pending erase before the store closes. A store that was
not closed (a crash, a kill) keeps a mark in its metadata and erases at its next open.
``SMRITI_ERASE_DELAY=0`` erases before each forget returns; ``smriti purge`` always
does.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.engine.core import Engine

log = get_logger(__name__)

#: The store metadata key that marks deleted memories not yet erased.
PENDING_KEY = "erase_pending"


class Erasure:
    """Coalesces the erases that forgets ask for (see the module docstring)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        #: Held while an erase runs, so that ``flush`` waits for one under way.
        self._busy = threading.Lock()
        self._timer: threading.Timer | None = None

    @property
    def delay(self) -> int:
        """Seconds from the first forget not yet erased to its erase."""
        return int(self.engine.settings.erase_delay)

    def request(self) -> None:
        """Erase what deleted memories left: now when the delay is 0, else soon."""
        if self.delay == 0:
            self.now()
            return
        with self._lock:
            if self._timer is not None:
                return
            self._mark(True)
            self._timer = threading.Timer(self.delay, self._run)
            self._timer.name = "smriti-erase"
            self._timer.daemon = True
            self._timer.start()

    def now(self) -> None:
        """Erase before returning (a pending one is done by this one)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        with self._busy:
            self.engine.backend.erase_deleted()
            self._mark(False)

    def at_open(self) -> None:
        """Schedule the erase a store closed without its pending erase still needs."""
        if self.engine.backend.get_meta(PENDING_KEY) == "1":
            log.info("memories forgotten before the store was last stopped are erased soon")
            self.request()

    def flush(self) -> None:
        """Run a pending erase now, or wait for one under way (before the store closes)."""
        with self._lock:
            pending, self._timer = self._timer, None
        if pending is not None:
            pending.cancel()
            self._erase_logged()
        with self._busy:
            pass

    def _run(self) -> None:
        with self._lock:
            self._timer = None
        self._erase_logged()

    def _erase_logged(self) -> None:
        # A failure leaves the mark: the next forget, close or open tries again.
        with self._busy:
            try:
                self.engine.backend.erase_deleted()
                self._mark(False)
            except Exception as exc:
                log.error(
                    "forgotten memories not yet erased from the store's files", error=str(exc)
                )

    def _mark(self, pending: bool) -> None:
        self.engine.backend.set_meta(PENDING_KEY, "1" if pending else "0")
