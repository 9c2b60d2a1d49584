"""Mappings whose entries stay packed in arrays until something touches them.

At 100,000 memories the working set holds about a million EncodedBy links and 300,000
associations. As dicts of dicts they cost some 200 bytes each and seconds to build,
which is most of a large store's start time and of its memory. Here they are loaded
as sorted arrays (one row range per key, as in a CSR matrix), and a key's dict is
built the first time recall or a write touches it; everything else stays packed. A
store adds a link to each of its cues, hubs with tens of thousands of members among
them: such an addition is kept beside the packed entry (``add_new``) rather than
building the entry's dict (milliseconds for a hub) on every store that touches one.
Forgetting memories likewise keeps their removal from a still-packed entry beside it
(``discard``): a consolidation that prunes 14,000 of 100,000 memories otherwise built
the dicts of every hub cue and of every neighbour they had (about 100 MB).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, MutableMapping, Sequence
from typing import Any, TypeVar

import numpy as np

V = TypeVar("V")


class LazyMap(MutableMapping[str, V]):
    """A dict whose base entries are built by ``build(slot)`` when first read.

    ``slots`` maps each base key to its slot; with ``packed`` lists behind the base
    entries, their sizes are known without building them (``size``). Once built, set or
    deleted, a key
    lives in an ordinary dict and its base entry is never used again. Building and
    deleting take a small lock of their own, so a read that builds an entry while
    another thread deletes it cannot bring it back.
    """

    def __init__(
        self,
        slots: dict[str, int] | None = None,
        build: Callable[[int], V] | None = None,
        packed: Packed | None = None,
    ) -> None:
        self._slots = slots if slots is not None else {}
        self._build = build
        self._live: dict[str, V] = {}
        #: Base keys whose entry was built, replaced or deleted.
        self._taken: set[str] = set()
        #: Items added to still-packed base entries (``add_new``), merged when built.
        self._added: dict[str, dict[Any, Any]] = {}
        #: Names removed from still-packed base entries (``discard``), dropped when built.
        self._removed: dict[str, set[Any]] = {}
        self._lock = threading.Lock()
        #: The packed lists behind the base entries, when they are ``Packed`` lists.
        self.packed = packed

    def touched(self) -> tuple[dict[str, V], list[int]]:
        """The entries held unpacked (a copy), and the slots of the base entries that no
        longer count (unpacked, replaced or deleted): with ``Packed.pairs(skip=...)``,
        an export of every entry that unpacks nothing."""
        with self._lock:
            slots = self._slots
            live, taken = dict(self._live), [slots[k] for k in self._taken]
            for key in self._added.keys() | self._removed.keys():  # built for the export only
                live[key] = self._built(key, slots[key], keep=True)
                taken.append(slots[key])
            return live, taken

    def _built(self, key: str, slot: int, keep: bool = False) -> V:
        """The base entry of ``key`` without the names removed from it and with the items
        added to it (both kept for later builds when ``keep``, else handed over to the
        built entry)."""
        value = self._build(slot)  # type: ignore[misc]
        removed = self._removed.get(key) if keep else self._removed.pop(key, None)
        for name in tuple(removed or ()):
            value.pop(name, None)  # type: ignore[attr-defined]
        added = self._added.get(key) if keep else self._added.pop(key, None)
        if added:
            value.update(added)  # type: ignore[attr-defined]
        return value

    def discard(self, key: str, name: Any) -> None:
        """``self[key].pop(name, None)`` without building a still-packed entry of ``key``
        (the removal is applied when it is built). A packed entry must hold ``name``:
        the graph's adjacency is symmetric, so its callers know it does."""
        with self._lock:
            live = self._live.get(key)
            if live is not None:
                live.pop(name, None)  # type: ignore[attr-defined]
                return
            added = self._added.get(key)
            if added is not None and name in added:
                del added[name]
                return
            if self._base_slot(key) is not None:
                self._removed.setdefault(key, set()).add(name)

    def add_new(self, key: str, name: Any, item: Any) -> tuple[Any, int]:
        """``self[key][name] = item`` for an entry of dicts, when ``name`` is in no
        packed entry (it was added since the lists were packed), without building a
        still-packed entry of ``key``. Returns the item ``name`` had (or None) and the
        entry's size before."""
        with self._lock:
            live = self._live.get(key)
            slot = self._base_slot(key) if live is None else None
            if live is None and slot is None:
                live = self._live[key] = {}  # type: ignore[assignment]
            if live is not None:
                before, size = live.get(name), len(live)  # type: ignore[attr-defined]
                live[name] = item  # type: ignore[index]
                return before, size
            added = self._added.setdefault(key, {})
            before, size = added.get(name), len(added) + self._packed_size(slot)  # type: ignore[arg-type]
            added[name] = item
            return before, size

    def _packed_size(self, slot: int) -> int:
        if self.packed is None:
            return len(self._build(slot))  # type: ignore[arg-type,misc]
        return self.packed.size(slot)

    def is_base(self, key: str) -> bool:
        """Whether ``key`` was one of the packed keys (whatever happened to it since)."""
        return key in self._slots

    def _base_slot(self, key: str) -> int | None:
        slot = self._slots.get(key)
        return None if slot is None or key in self._taken else slot

    def __getitem__(self, key: str) -> V:
        try:
            return self._live[key]
        except KeyError:
            pass
        with self._lock:
            if key in self._live:
                return self._live[key]
            slot = self._base_slot(key)
            if slot is None or self._build is None:
                raise KeyError(key)
            value = self._live[key] = self._built(key, slot)
            self._taken.add(key)
            return value

    def __setitem__(self, key: str, value: V) -> None:
        with self._lock:
            self._live[key] = value
            self._added.pop(key, None)
            self._removed.pop(key, None)
            if key in self._slots:
                self._taken.add(key)

    def __delitem__(self, key: str) -> None:
        with self._lock:
            self._added.pop(key, None)
            self._removed.pop(key, None)
            if key in self._live:
                del self._live[key]
            elif self._base_slot(key) is not None:
                self._taken.add(key)
            else:
                raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._live or (isinstance(key, str) and self._base_slot(key) is not None)

    def __iter__(self) -> Iterator[str]:
        yield from list(self._live)
        taken = self._taken
        yield from (k for k in list(self._slots) if k not in taken)

    def __len__(self) -> int:
        return len(self._live) + len(self._slots) - len(self._taken)

    def peek(self, key: str) -> V | None:
        """The entry of ``key`` (None if absent), built for this call only when it is
        still packed: for walks over every entry that should not unpack them all."""
        live = self._live.get(key)
        if live is not None:
            return live
        slot = self._base_slot(key)
        if slot is None or self._build is None:
            return self._live.get(key)  # set by another thread meanwhile, or absent
        return self._built(key, slot, keep=True)

    def parts(self) -> tuple[dict[str, V], dict[str, int], set[str]]:
        """The unpacked entries, the base slots and the base keys no longer packed, for a
        reader's tight loop over many keys (its owner's lock held; nothing is copied): a
        key is unpacked when in the first, still packed when in the second and not the
        third. Not for a map with items added by ``add_new`` or removed by ``discard``
        (they are in none of them)."""
        return self._live, self._slots, self._taken

    def walk(self) -> Iterator[tuple[str, V]]:
        """Every (key, entry), built for the walk only (see ``peek``)."""
        for key in self:
            value = self.peek(key)
            if value is not None:
                yield key, value

    def size(self, key: str) -> int:
        """``len(self[key])`` without building it (0 for an absent key)."""
        live = self._live.get(key)
        if live is not None:
            return len(live)  # type: ignore[arg-type]
        slot = self._base_slot(key)
        if slot is None:
            return 0
        if self.packed is None:
            return len(self[key])  # type: ignore[arg-type]
        return (
            self.packed.size(slot) + len(self._added.get(key, ())) - len(self._removed.get(key, ()))
        )

    def unpacked(self) -> int:
        """The sum of the sizes of the entries held unpacked (and of the items added to
        packed ones; names removed from packed ones are not counted back)."""
        added = sum(len(v) for v in list(self._added.values()))
        return added + sum(len(v) for v in list(self._live.values()))  # type: ignore[arg-type]

    def total(self) -> int:
        """The sum of every entry's size (``size``), without building any (base entries
        count only when they are packed lists)."""
        with self._lock:
            live = sum(len(v) for v in self._live.values())  # type: ignore[arg-type]
            live += sum(len(v) for v in self._added.values())
            live -= sum(len(v) for v in self._removed.values())
            taken = [self._slots[k] for k in self._taken]
        if self.packed is None:
            return live  # base entries of unknown size
        sizes = np.diff(self.packed.offsets)
        return live + int(sizes.sum()) - int(sizes[taken].sum() if taken else 0)


class Packed:
    """Lists of (name, value) per key slot, sorted by slot: a CSR matrix with names.

    ``targets[offsets[s]:offsets[s + 1]]`` are the slots, in ``names``, of what key slot
    ``s`` (named ``keys[s]``) points to; ``columns`` hold the values of the same range as
    arrays and ``convert`` turns slices of them into the values a dict entry holds.
    """

    def __init__(
        self,
        keys: Sequence[str],
        offsets: np.ndarray,
        targets: np.ndarray,
        names: Sequence[str],
        columns: tuple[np.ndarray, ...],
        convert: Callable[[tuple[np.ndarray, ...]], list[object]],
    ) -> None:
        self.keys = keys
        self.offsets = offsets
        self.targets = targets
        self.names = names
        self.columns = columns
        self.convert = convert

    @classmethod
    def from_pairs(
        cls,
        keys: Sequence[str],
        sources: np.ndarray,
        targets: np.ndarray,
        names: Sequence[str],
        columns: tuple[np.ndarray, ...],
        convert: Callable[[tuple[np.ndarray, ...]], list[object]],
    ) -> Packed:
        """Group the pairs ``(sources[i], targets[i])``, whose values are ``columns[.][i]``,
        by source slot (slots index ``keys``, targets index ``names``)."""
        order = np.argsort(sources, kind="stable")
        counts = np.bincount(sources, minlength=len(keys))
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        ordered = tuple(np.ascontiguousarray(c[order]) for c in columns)
        return cls(keys, offsets, np.ascontiguousarray(targets[order]), names, ordered, convert)

    def size(self, slot: int) -> int:
        """How many entries key slot ``slot`` has."""
        return int(self.offsets[slot + 1] - self.offsets[slot])

    def build(self, slot: int) -> dict[str, object]:
        """The dict {name: value} of key slot ``slot``."""
        lo, hi = int(self.offsets[slot]), int(self.offsets[slot + 1])
        names = self.names
        values = self.convert(tuple(c[lo:hi] for c in self.columns))
        return dict(zip([names[t] for t in self.targets[lo:hi].tolist()], values, strict=True))

    def lazy_map(self, slots: dict[str, int]) -> LazyMap[dict[str, object]]:
        """A LazyMap over these lists, keyed by ``slots`` (the inverse of ``keys``)."""
        return LazyMap(slots, self.build, self)

    def pairs(
        self, skip: Collection[int] = ()
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """(source slots, target slots, columns) of every entry, without the key slots in
        ``skip``: an export that unpacks nothing."""
        counts = np.diff(self.offsets)
        sources = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        if not skip:
            return sources, self.targets, self.columns
        keep = np.ones(counts.size, dtype=bool)
        keep[np.fromiter(skip, dtype=np.int64, count=len(skip))] = False
        kept = keep[sources]
        return sources[kept], self.targets[kept], tuple(c[kept] for c in self.columns)
