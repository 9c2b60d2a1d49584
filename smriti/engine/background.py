"""Periodic consolidation and backup in daemon threads."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.engine.core import Engine

log = get_logger(__name__)


class Background:
    """Runs consolidation every CONSOLIDATION_INTERVAL and backup every BACKUP_SYNC_INTERVAL."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the periodic threads that have a non-zero interval."""
        s = self.engine.settings
        self._stop.clear()
        if s.consolidation_interval > 0:
            self._spawn("consolidation", s.consolidation_interval, self._consolidate)
        if s.backup_sync_interval > 0 and self.engine.backup.name != "none":
            self._spawn("backup", s.backup_sync_interval, self._sync)

    def stop(self) -> None:
        """Ask the threads to stop and wait for a running step to finish."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self._threads.clear()

    def _spawn(self, name: str, interval: int, step: object) -> None:
        thread = threading.Thread(
            target=self._loop, args=(name, interval, step), name=f"smriti-{name}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _loop(self, name: str, interval: int, step: object) -> None:
        while not self._stop.wait(interval):
            try:
                step()  # type: ignore[operator]
            except Exception as exc:  # keep serving; the next interval tries again
                log.error(f"periodic {name} failed", error=f"{type(exc).__name__}: {exc}")

    def _consolidate(self) -> None:
        self.engine.consolidate()

    def _sync(self) -> None:
        if self.engine.dirty.is_set():
            self.engine.sync()
