"""The order of ``list`` mode: most recently accessed first, then newest created, then id
descending (``smriti.backend.Listing``).

Two sorted lists of keys: a large base and a small head that takes every change. Keys
sort ascending, so the listing order is the lists read backwards, and the page after a
key starts where ``bisect`` puts it. Recall strengthens ten memories per call, each
becoming the most recent; inserting those into a 100,000-key list moved much of the
list each time (3 ms per recall). A changed memory's old key stays in its list, skipped
as stale, until the head is merged into the base (every ``HEAD_MAX`` changes, one pass).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from datetime import datetime

#: (last access, creation, id), the times as POSIX seconds: descending order is the
#: listing order. Distinct microseconds stay distinct (and ordered) as float seconds.
Key = tuple[float, float, str]
#: Changes gathered in the head before it is merged into the base.
HEAD_MAX = 4096


def order_key(engram_id: str, last_accessed_at: datetime, created_at: datetime) -> Key:
    """The sort key of one memory (aware datetimes; ``smriti.index.graph.utc``)."""
    return (last_accessed_at.timestamp(), created_at.timestamp(), engram_id)


class RecencyOrder:
    """Every memory's key, kept sorted. Callers hold the working set's lock."""

    def __init__(self) -> None:
        self._base: list[Key] = []
        self._head: list[Key] = []
        self._of: dict[str, Key] = {}

    def __len__(self) -> int:
        return len(self._of)

    def load(self, keys: Iterable[Key], ordered: bool = False) -> None:
        """Replace the contents with ``keys`` (one sort instead of many insertions);
        ``ordered``: they are already sorted ascending (the listing order reversed),
        each id once."""
        if ordered:
            self._base = list(keys)
            self._of = {k[2]: k for k in self._base}
        else:
            self._of = {k[2]: k for k in keys}
            self._base = sorted(self._of.values())
        self._head = []

    def put(self, key: Key) -> None:
        """Insert or move one memory."""
        if self._of.get(key[2]) == key:
            return
        self._of[key[2]] = key
        insort(self._head, key)
        if len(self._head) > HEAD_MAX:
            self._merge()

    def remove(self, engram_id: str) -> None:
        """Forget one memory (unknown ids are ignored); its keys become stale."""
        self._of.pop(engram_id, None)

    def _merge(self) -> None:
        self._base = list(self._live(heapq.merge(self._base, self._head)))
        self._head = []

    def _live(self, keys: Iterable[Key]) -> Iterator[Key]:
        """The current keys among ``keys`` (sorted), each id once: a memory moved back
        to an earlier key has that key twice, one of them stale."""
        of, seen = self._of, set()
        for k in keys:
            if of.get(k[2]) == k and k[2] not in seen:
                seen.add(k[2])
                yield k

    def newest(self, before: Key | None = None, copy: bool = True) -> Iterator[str]:
        """Ids in listing order, only those whose key is below ``before`` when given.

        ``copy`` reads from copies of the lists (safe while they change); without it
        the caller holds the lock while it iterates (no copy of 100,000 keys)."""
        base, head = self._base, self._head
        if copy:
            base, head = list(base), list(head)
        ends = (len(base), len(head))
        if before is not None:
            ends = (bisect_left(base, before), bisect_left(head, before))
        merged = heapq.merge(_down(base, ends[0]), _down(head, ends[1]), reverse=True)
        return (k[2] for k in self._live(merged))

    def head(self, n: int, before: Key | None = None) -> list[str]:
        """The first ``n`` ids in listing order (below ``before`` when given)."""
        out: list[str] = []
        if n <= 0:
            return out
        for key in self.newest(before, copy=False):
            out.append(key)
            if len(out) >= n:
                break
        return out

    def ascending(self) -> list[str]:
        """Every id in ascending key order (the listing order reversed), for a snapshot
        that ``load(..., ordered=True)`` reads back."""
        merged = heapq.merge(self._base, self._head)
        return [k[2] for k in self._live(merged)]


def _down(keys: list[Key], end: int) -> Iterator[Key]:
    """``keys[end - 1]``, ``keys[end - 2]``, ... ``keys[0]``, lazily (no slice copied)."""
    return map(keys.__getitem__, range(end - 1, -1, -1))
