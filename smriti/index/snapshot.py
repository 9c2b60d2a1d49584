"""A working set saved at close and loaded at the next open, so a large store starts fast.

Rebuilding a working set from the store means reading every row through the database
and tokenising every memory again (tens of seconds at 100,000 memories); loading it
from this snapshot is mostly reading numpy arrays. The snapshot is only a cache of the
store: it is trusted only when the stamp it was saved with is the one the store holds
(``STAMP_KEY``), and ``IndexedBackend`` replaces that stamp by ``DIRTY`` in the store
before it writes anything, so a process that dies after writing leaves a snapshot that
is never used. Deleting the directory is always safe.

Layout of ``{STORAGE_LOCATION}/{user}/working-set/``: ``vec_units.npy`` and
``vec_codes.npy`` (the vectors and their int8 copy, with the cache's spare rows as a
hole at the end; the int8 copy is mapped into memory at load, the vectors are read
from their file when a search re-scores them, ``smriti.backend.rows``), ``arrays.npz``
(the other numbers; no pickles anywhere), ``strings.json`` (ids, texts, names) and
``meta.json`` (format and stamp), written last; ``stale`` appears when the store is
first written after the save (a hint for the next start, which then does not load it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from array import array
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from sys import intern
from typing import Any

import numpy as np

from smriti.backend import Cue, make_private, normalise_cue_name, open_private, private_dir
from smriti.backend.rows import UnitRows, npy_rows
from smriti.index.graph import FIELDS, POS, Facets
from smriti.index.working_set import WorkingSet

#: The store's metadata key holding the stamp of the snapshot that matches it.
STAMP_KEY = "working_set.snapshot"
#: The stamp of a store written since its snapshot was saved.
DIRTY = "dirty"
#: Bumped whenever the layout changes: a snapshot of another format is never read (the
#: next start rebuilds it from the store). 3: the version fields, ascending listing.
#: 4: the origin fields.
FORMAT = 4
#: A file whose presence says the store changed since the snapshot (``mark_stale``).
STALE = "stale"
#: Arrays saved as .npy files of their own and read straight into the vector cache.
LARGE = ("vec_units", "vec_codes")
_TIMES = (POS["created_at"], POS["last_accessed_at"])
#: Rows built (and memories' texts encoded) at a time while saving.
SAVE_CHUNK = 4096
#: The string fields of a row, in the order ``strings.json`` holds them.
_TEXTS = (
    "content", "summary", "memory_type", "source", "tags", "supersedes", "superseded_by",
    "origin", "principal",
)  # fmt: skip


def _seconds(value: object) -> float:
    """POSIX seconds of an optional time (NaN: none)."""
    return np.nan if value is None else value.timestamp()  # type: ignore[attr-defined]


def save(ws: WorkingSet, directory: Path, stamp: str) -> None:
    """Write ``ws`` to ``directory`` (replacing what is there) under ``stamp``."""
    with ws.lock:
        arrays, strings, count = _collect(ws)
        if directory.exists():
            shutil.rmtree(directory)
        private_dir(directory)
        spare = _capacity(count)
        for name in LARGE:  # files of their own, with the cache's spare rows
            with open_private(directory / f"{name}.npy", "wb") as fh:
                _write_rows(fh, *_blocks(arrays.pop(name)), spare)
                _sync(fh)
    with open_private(directory / "arrays.npz", "wb") as fh:
        np.savez(fh, **arrays)
        _sync(fh)
    with open_private(directory / "strings.json", "w", encoding="utf-8") as fh:
        _write_json(fh, strings)
        _sync(fh)
    meta = {"format": FORMAT, "stamp": stamp, "engrams": count, "fields": list(FIELDS)}
    with open_private(directory / "meta.json", "w", encoding="utf-8") as fh:
        json.dump(meta, fh)
        _sync(fh)


def _row_columns(graph: Any, ids: list[str]) -> tuple[np.ndarray, np.ndarray, list[list[Any]]]:
    """The rows' numbers, times and text fields, built a chunk of rows at a time: most
    rows are still packed, and building all 100,000 at once took 100 MB more."""
    n = len(ids)
    numbers = np.zeros((n, 4), dtype=np.float64)
    times = np.zeros((n, 3), dtype=np.float64)
    texts: list[list[Any]] = []
    number_at = [POS[f] for f in ("importance", "access_count", "decay_factor", "cluster_id")]
    at_superseded = POS["superseded_at"]
    for start in range(0, n, SAVE_CHUNK):
        rows = [graph.rows.peek(k) for k in ids[start : start + SAVE_CHUNK]]
        end = start + len(rows)
        numbers[start:end] = [[r[i] for i in number_at] for r in rows]
        times[start:end] = [
            [*(r[i].timestamp() for i in _TIMES), _seconds(r[at_superseded])] for r in rows
        ]
        texts.extend([r[POS[f]] for f in _TEXTS] for r in rows)
    return numbers, times, texts


def _write_json(fh: Any, strings: dict[str, Any]) -> None:
    """``json.dumps(strings)`` written a part at a time (the rows in chunks), so the
    whole text (tens of MB) is never held at once; ``json.loads`` reads it back."""
    fh.write("{")
    for i, (key, value) in enumerate(strings.items()):
        fh.write(("," if i else "") + json.dumps(key) + ":")
        if key != "rows":
            fh.write(json.dumps(value, ensure_ascii=False))  # dumps: the C encoder
            continue
        fh.write("[")
        for start in range(0, len(value), SAVE_CHUNK):
            part = json.dumps(value[start : start + SAVE_CHUNK], ensure_ascii=False)
            fh.write(("," if start else "") + part[1:-1])
        fh.write("]")
    fh.write("}")


def _collect(ws: WorkingSet) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The arrays (``vec_units`` as ``(UnitRows, n)``) and strings of a snapshot of ``ws``
    (its lock held)."""
    graph, text = ws.graph, ws.graph.text
    if text.dead:
        text.compact()  # documents renumbered: the rows' order is the documents' order
    ids = [k for k in text.ids if k is not None]
    slot = {k: i for i, k in enumerate(ids)}
    cue_ids = list(ws.cues_by_id)
    cue_slot = {c: i for i, c in enumerate(cue_ids)}
    numbers, times, texts = _row_columns(graph, ids)
    terms = text.terms()
    posts = [text.posting(t) for t in terms]
    docs = [np.asarray(p[0], dtype=np.int32) for p in posts if p is not None]
    tfs = [np.asarray(p[1], dtype=np.float32) for p in posts if p is not None]
    link_e, link_c, link_s = graph.export_links(slot, cue_slot)
    edge_a, edge_b, edge_s, edge_r, edge_t, relations = graph.export_edges(slot)
    rank_cue, rank_size, rank_e, rank_s = [], [], [], []
    for cue, entries in graph.ranking.lists.items():
        if cue in cue_slot and graph.c2e.size(cue) > graph.ranking.CAP:
            rank_cue.append(cue_slot[cue])
            rank_size.append(len(entries))
            rank_e.extend(slot[key] for _, key, _ in entries)
            rank_s.extend(strength for _, _, strength in entries)
    vec_ids, vec_units, vec_norms, vec_labels, vec_columns = ws.vectors.export()
    cue_vec_ids, cue_units, cue_norms, _, _ = ws.cue_vectors.export()
    codes, bias, scale, l1 = vec_columns or [np.zeros((0, 0), np.uint8), *[np.zeros(0)] * 3]
    strings = {
        "ids": ids,
        "rows": texts,
        "cues": [[c, ws.cues_by_id[c].name, ws.cues_by_id[c].cue_type] for c in cue_ids],
        "terms": [t for t, p in zip(terms, posts, strict=True) if p is not None],
        "labels": ws.labels,
        "relations": relations,
        "vector_ids": [slot[k] for k in vec_ids],
        "cue_vector_ids": [cue_slot[c] for c in cue_vec_ids],
    }
    arrays = {
        "numbers": numbers,
        "times": times,
        "lengths": np.array(text.lengths, dtype=np.float32),
        "text_labels": np.array(text.labels, dtype=np.int16),
        "term_sizes": np.array([d.size for d in docs], dtype=np.int64),
        "term_docs": np.concatenate(docs) if docs else np.zeros(0, np.int32),
        "term_tfs": np.concatenate(tfs) if tfs else np.zeros(0, np.float32),
        "link_e": link_e,
        "link_c": link_c,
        "link_s": link_s,
        "edge_a": edge_a,
        "edge_b": edge_b,
        "edge_s": edge_s,
        "edge_r": edge_r,
        "edge_t": edge_t,
        "rank_cue": np.array(rank_cue, dtype=np.int32),
        "rank_size": np.array(rank_size, dtype=np.int32),
        "rank_e": np.array(rank_e, dtype=np.int32),
        "rank_s": np.array(rank_s, dtype=np.float64),
        "listing": np.array([slot[k] for k in ws.recency.ascending() if k in slot], np.int32),
        "vec_units": (vec_units, len(vec_ids)),
        "vec_norms": vec_norms,
        "vec_labels": vec_labels,
        "vec_codes": codes,
        "vec_bias": bias,
        "vec_scale": scale,
        "vec_l1": l1,
        "cue_units": cue_units.array(len(cue_vec_ids)),
        "cue_norms": cue_norms,
    }
    return arrays, strings, len(ids)


def _sync(fh: Any) -> None:
    fh.flush()
    os.fsync(fh.fileno())


def mark_stale(directory: Path) -> None:
    """Note in ``directory`` that the store changed since it was saved: a hint that
    spares the next start loading it for nothing (the store's stamp decides)."""
    if directory.is_dir():
        with contextlib.suppress(OSError):
            make_private(directory / STALE)


def stamp_of(directory: Path) -> str | None:
    """The stamp ``directory`` was saved under, or None (missing, other format)."""
    try:
        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not _current(meta) or (directory / STALE).exists():
        return None
    stamp = meta.get("stamp")
    return stamp if isinstance(stamp, str) else None


def _current(meta: object) -> bool:
    """Whether ``meta`` (a parsed meta.json) is of this format and these row fields."""
    return (
        isinstance(meta, dict)
        and meta.get("format") == FORMAT
        and meta.get("fields") == list(FIELDS)
    )


def engrams_of(directory: Path) -> int | None:
    """How many engrams the snapshot in ``directory`` holds (None when unreadable)."""
    try:
        count = json.loads((directory / "meta.json").read_text(encoding="utf-8"))["engrams"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return count if isinstance(count, int) else None


def load(directory: Path) -> WorkingSet:
    """The working set saved in ``directory`` (raises on a missing or damaged file, or
    one of another format: its rows would not be this version's)."""
    meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    if not _current(meta):
        raise ValueError(f"{directory}: a snapshot of another format ({meta.get('format')!r})")
    with np.load(directory / "arrays.npz", allow_pickle=False) as npz:
        a = {name: npz[name] for name in npz.files}
    strings = json.loads((directory / "strings.json").read_text(encoding="utf-8"))
    ids: list[str] = strings["ids"]
    n = len(ids)
    ws = WorkingSet(capacity=_capacity(n))
    capacity = ws.vectors.capacity_for(n)
    a["vec_codes"] = _rows(directory / "vec_codes.npy", capacity)
    a["vec_units"] = _unit_rows(directory / "vec_units.npy", len(strings["vector_ids"]), capacity)
    ws.labels.update(strings["labels"])
    graph = ws.graph
    texts, numbers = strings["rows"], a["numbers"]
    for text in texts:  # a few distinct origins and principals: one string object each
        text[7], text[8] = intern(text[7]), intern(text[8])
    facets = _facet_reader(texts, numbers, a["times"])
    slots = graph.adopt_rows(ids, _row_builder(ids, texts, numbers, a["times"]), facets)
    times = a["times"]
    if "listing" in a and a["listing"].size == n:  # saved sorted: no sort at load
        accessed, created = times[:, 1].tolist(), times[:, 0].tolist()
        order = a["listing"].tolist()
        ws.recency.load([(accessed[i], created[i], ids[i]) for i in order], ordered=True)
    else:
        ws.recency.load(zip(times[:, 1].tolist(), times[:, 0].tolist(), ids, strict=True))
    _load_text(graph.text, ids, strings["terms"], a)
    cues = [Cue(c, name, kind) for c, name, kind in strings["cues"]]
    cue_keys = [c.id for c in cues]
    ws.cues_by_id.update((c.id, c) for c in cues)
    ws.cues_by_key.update((normalise_cue_name(c.name), c) for c in cues)
    links = (a["link_e"], a["link_c"], a["link_s"])
    edges = tuple(a[f"edge_{x}"] for x in "absrt")
    graph.adopt_edges(ids, slots, cue_keys, links, edges, strings["relations"])  # type: ignore[arg-type]
    _load_ranking(graph, ids, cue_keys, a)
    vector_ids = [ids[i] for i in strings["vector_ids"]]
    columns = [a["vec_codes"], a["vec_bias"], a["vec_scale"], a["vec_l1"]]
    ws.vectors.restore(vector_ids, a["vec_units"], a["vec_norms"], a["vec_labels"], columns)
    cue_vector_ids = [cue_keys[i] for i in strings["cue_vector_ids"]]
    no_labels = np.zeros(len(cue_vector_ids), np.int16)
    ws.cue_vectors.restore(cue_vector_ids, a["cue_units"], a["cue_norms"], no_labels)
    return ws


def _row_builder(
    ids: list[str], texts: list[Any], numbers: np.ndarray, times: np.ndarray
) -> Callable[[int], list[object]]:
    """The function building the row of slot ``i`` (see ``Graph.adopt_rows``)."""
    when = datetime.fromtimestamp

    def row(i: int) -> list[object]:
        content, summary, kind, source, tags, supersedes, superseded_by, origin, who = texts[i]
        importance, access_count, decay, cluster = numbers[i].tolist()
        created, accessed, superseded = times[i].tolist()
        return [
            content, summary, kind, importance, int(access_count), when(created, UTC),
            when(accessed, UTC), decay, source, tags, int(cluster), supersedes, superseded_by,
            None if superseded != superseded else when(superseded, UTC), origin, who, ids[i],
        ]  # fmt: skip

    return row


def _facet_reader(
    texts: list[Any], numbers: np.ndarray, times: np.ndarray
) -> Callable[[int], Facets]:
    """The function reading the ``Facets`` of slot ``i`` without building its row."""
    created, cluster = times[:, 0], numbers[:, 3]

    def facets(i: int) -> Facets:
        text = texts[i]  # as _TEXTS: memory type 2, tags 4, superseded_by 6, origin 7
        return (text[2], text[4], created.item(i), text[6], int(cluster.item(i)), text[7])

    return facets


def _capacity(rows: int) -> int:
    """The vector cache's capacity for a working set of ``rows`` loaded from a snapshot:
    room to grow by a sixteenth before its arrays are copied."""
    return rows + rows // 16 + 64


def _blocks(value: Any) -> tuple[Iterable[np.ndarray], tuple[int, ...], np.dtype]:
    """(blocks, shape, dtype) of an array, or of the first ``n`` of ``(UnitRows, n)``
    (read a block at a time, so a save does not hold them all)."""
    if isinstance(value, np.ndarray):
        value = np.ascontiguousarray(value)
        return [value], value.shape, value.dtype
    rows, n = value
    return rows.blocks(n), (n, rows.dims), np.dtype(np.float32)


def _write_rows(
    fh: Any, blocks: Iterable[np.ndarray], shape: tuple[int, ...], dtype: np.dtype, capacity: int
) -> None:
    """Write the array of ``shape`` given by ``blocks`` (consecutive rows) as a .npy array
    of ``max(capacity, shape[0])`` rows: the rows past them are zeros, left as a hole in
    the file (no disk space, nothing to write)."""
    total = max(capacity, shape[0])
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": (total, *shape[1:])}  # fmt: skip
    np.lib.format.write_array_header_2_0(fh, header)
    for block in blocks:
        fh.write(memoryview(np.ascontiguousarray(block).reshape(-1).view(np.uint8)))
    row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
    fh.truncate(fh.tell() + (total - shape[0]) * row_bytes)


def _rows(path: Path, capacity: int) -> np.ndarray:
    """The array saved at ``path`` with at least ``capacity`` rows.

    A file that holds them (``_write_rows``) is mapped copy-on-write: nothing is read
    until a row is touched, and a scan reads the page cache in place, so a large store
    starts without copying its int8 vectors (every search scans them all). The mapping
    stays valid when the snapshot is saved again (``save`` writes new files). Windows
    cannot delete a mapped file, so there, and for older files, the rows are read."""
    if os.name == "posix":
        try:
            mapped = np.load(path, mmap_mode="c", allow_pickle=False)
        except ValueError:  # nothing to map (no rows), or not a plain array: read it
            mapped = None
        if mapped is not None and mapped.ndim and mapped.shape[0] >= capacity:
            return mapped.view(np.ndarray)  # a plain array on the mapping (it keeps it)
        del mapped
    return _read_rows(path, capacity)


def _unit_rows(path: Path, count: int, capacity: int) -> UnitRows | np.ndarray:
    """The vector cache's unit rows: the first ``count`` of the file at ``path``, read on
    demand (``smriti.backend.rows``), with room for ``capacity`` rows in all. Where
    ``os.preadv`` is missing (Windows) they are read into memory."""
    if count and hasattr(os, "preadv"):
        return UnitRows.on_file(path, count, max(1, capacity - count))
    return _read_rows(path, capacity)


def _read_rows(path: Path, capacity: int) -> np.ndarray:
    """The array saved at ``path`` (a .npy file), in an array of at least ``capacity``
    rows whose rows past the saved ones are zeros."""
    offset, shape, dtype = npy_rows(path)
    with path.open("rb") as fh:
        fh.seek(offset)
        out = np.zeros((max(capacity, shape[0]), *shape[1:]), dtype=dtype)
        view = memoryview(out[: shape[0]].reshape(-1).view(np.uint8))
        done = 0
        while done < view.nbytes:
            got = fh.readinto(view[done:])
            if not got:
                raise ValueError(f"{path.name}: truncated")
            done += got
    return out


def _load_text(text: Any, ids: list[str], terms: list[str], a: dict[str, np.ndarray]) -> None:
    n = len(ids)
    text.ids = list(ids)
    text.doc_of = {k: i for i, k in enumerate(ids)}
    text.alive = bytearray(b"\x01" * n)
    text.lengths = array("f", a["lengths"].astype(np.float32).tobytes())
    text.labels = array("h", a["text_labels"].astype(np.int16).tobytes())
    text.live, text.dead = n, 0
    text.total_length = float(a["lengths"].sum(dtype=np.float64))
    text.freeze(terms, a["term_sizes"], a["term_docs"], a["term_tfs"])


def _load_ranking(graph: Any, ids: list[str], cues: list[str], a: dict[str, Any]) -> None:
    """The hub cues' importance lists (computing them costs ~1.5 s at 100k memories)."""
    importance = a["numbers"][:, 0].tolist()
    members, strengths = a["rank_e"].tolist(), a["rank_s"].tolist()
    start = 0
    for cue, size in zip(a["rank_cue"].tolist(), a["rank_size"].tolist(), strict=True):
        graph.ranking.lists[cues[cue]] = [
            (-importance[e], ids[e], strength)
            for e, strength in zip(members[start : start + size], strengths[start : start + size],
                                   strict=True)
        ]  # fmt: skip
        start += size
