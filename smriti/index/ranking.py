"""Per-cue lists of the most important engrams, kept up to date as the graph changes.

Recall follows a cue to its ``limit`` most important engrams. Computing that from a hub
cue's members (48,000 at 100k memories) takes ~15 ms; the lists are therefore cached
and, instead of being dropped on every store that touches the cue, updated in place.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping

#: Entry: (-importance, engram id, link strength); ordered by the first two.
Entry = tuple[float, str, float]


class TopByImportance:
    """For each cue, the best members by (importance desc, id asc), or nothing cached.

    Invariant: a cached list holds exactly the best ``len(list)`` members of its cue, in
    order. Adding a member inserts it when it beats the last entry or the list holds
    every member; removing one deletes its entry (the rest are still the best); an
    importance change removes the entry and re-inserts it by the same rule as adding.
    A list that runs shorter than a request is computed afresh. Callers hold the
    mirror's lock.
    """

    CAP = 64

    def __init__(self) -> None:
        self.lists: dict[str, list[Entry]] = {}

    def best(
        self,
        cue: str,
        limit: int,
        members: Mapping[str, float] | Callable[[], Mapping[str, float]],
        importance: Callable[[str], float],
        count: int | None = None,
    ) -> list[tuple[str, float]]:
        """The ``limit`` most important members of ``cue`` as (engram id, strength).

        ``members`` may be a function returning them, called only when the cached list
        cannot answer; ``count`` is then how many members there are."""
        entries = self.lists.get(cue)
        if count is None:
            count = len(members)  # type: ignore[arg-type]
        if entries is None or len(entries) < min(limit, count):
            size = max(limit, self.CAP)
            found = members() if callable(members) else members
            entries = heapq.nsmallest(size, ((-importance(k), k, s) for k, s in found.items()))
            self.lists[cue] = entries
        return [(key, strength) for _, key, strength in entries[:limit]]

    def added(
        self, cue: str, key: str, strength: float, importance: float, members_before: int
    ) -> None:
        """``key`` became a member of ``cue`` (which had ``members_before`` members)."""
        entries = self.lists.get(cue)
        if entries is None:
            return
        entry = (-importance, key, strength)
        if len(entries) == members_before or entry < entries[-1]:
            insort(entries, entry)
            if len(entries) > max(self.CAP, members_before):
                entries.pop()

    def _find(self, cue: str, key: str, importance: float) -> tuple[list[Entry], int] | None:
        """The cached list of ``cue`` and the position of ``key`` in it, if both exist.

        ``importance`` is the one ``key`` was ranked by (a binary search: linear scans
        of the hub lists took 2.6 s when consolidation deleted 14,000 engrams)."""
        entries = self.lists.get(cue)
        if not entries:
            return None
        i = bisect_left(entries, (-importance, key))
        if i < len(entries) and entries[i][1] == key:
            return entries, i
        return None

    def restrengthened(self, cue: str, key: str, strength: float, importance: float) -> None:
        """The link of member ``key`` (of ``importance``) to ``cue`` has a new strength."""
        found = self._find(cue, key, importance)
        if found is not None:
            entries, i = found
            entries[i] = (entries[i][0], key, strength)

    def removed(self, cue: str, key: str, importance: float) -> None:
        """``key`` (of ``importance``) is no longer a member of ``cue``."""
        found = self._find(cue, key, importance)
        if found is not None:
            entries, i = found
            del entries[i]

    def reranked(
        self, cue: str, key: str, strength: float, old: float, importance: float, members: int
    ) -> None:
        """Member ``key`` of ``cue`` (``members`` in all) has a new importance (it was
        ``old``)."""
        entries = self.lists.get(cue)
        if entries is None:
            return
        held = len(entries)
        complete = held == members
        self.removed(cue, key, old)
        entry = (-importance, key, strength)
        if complete or (entries and entry < entries[-1]):
            insort(entries, entry)
            if len(entries) > held:
                entries.pop()
        # Otherwise it fell past the end: the rest are still the best len(entries).

    def drop(self, cue: str) -> None:
        """Forget the list of ``cue``."""
        self.lists.pop(cue, None)
