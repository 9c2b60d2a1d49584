"""The memory budget shared by every working set of a process (``SMRITI_WORKING_SET_MB``).

A process that serves several users (the HTTP server, an owner of several stores)
holds one working set per user. Each says how big it is when it finishes loading; when
the sum passes the budget the least recently used ones are evicted (their reads go to
the backend again until they are loaded once more).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol


class Evictable(Protocol):
    """What the budget can ask of a working set's holder."""

    def evict(self) -> None:
        """Drop the working set; reads go to the backend."""


class Budget:
    """Sizes of the loaded working sets, least recently used first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sizes: OrderedDict[int, tuple[Evictable, int]] = OrderedDict()

    def admit(self, holder: Evictable, nbytes: int, limit_bytes: int) -> bool:
        """Account ``nbytes`` for ``holder``, evicting others least recently used first
        to make room. False (nothing evicted) when it cannot fit even alone."""
        if nbytes > limit_bytes:
            return False
        victims = []
        with self._lock:
            self._sizes.pop(id(holder), None)
            used = sum(n for _, n in self._sizes.values())
            while self._sizes and used + nbytes > limit_bytes:
                _, (victim, size) = self._sizes.popitem(last=False)
                used -= size
                victims.append(victim)
            self._sizes[id(holder)] = (holder, nbytes)
        for victim in victims:
            victim.evict()
        return True

    def touch(self, holder: Evictable) -> None:
        """``holder`` was used: it is the last to be evicted."""
        with self._lock:
            if id(holder) in self._sizes:
                self._sizes.move_to_end(id(holder))

    def release(self, holder: Evictable) -> None:
        """``holder`` dropped its working set."""
        with self._lock:
            self._sizes.pop(id(holder), None)

    def used(self) -> int:
        """Bytes accounted to loaded working sets."""
        with self._lock:
            return sum(n for _, n in self._sizes.values())


#: The process's budget.
BUDGET = Budget()
