"""A gate that many writes pass together and a whole-store rewrite passes alone.

Stores and forgets run side by side (the backend orders their transactions); a
re-embedding reads every memory and writes it back, so a memory stored meanwhile would
keep the old model's vector and one forgotten meanwhile would be written back. It
therefore waits for the writes under way and holds new ones until it is done. A
waiting rewrite goes first, so a steady stream of stores cannot starve it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class WriteGate:
    """Shared passage for ordinary writes, exclusive for whole-store rewrites."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the gate with other ordinary writes."""
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and not self._waiting)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the gate alone (after the writes under way finish)."""
        with self._cond:
            self._waiting += 1
            try:
                self._cond.wait_for(lambda: not self._exclusive and not self._shared)
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()
