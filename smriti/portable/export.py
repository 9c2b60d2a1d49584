"""Streaming export of one user's graph into a portable JSON Lines file."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from smriti.errors import BackendError, InvalidInput
from smriti.logs import get_logger
from smriti.model import Engram, utcnow
from smriti.portable import tombstones
from smriti.portable.format import (
    EMBEDDING_MODEL_KEY,
    EXPORTED_META_KEYS,
    FORMAT,
    KINDS,
    TOMBSTONE,
    VECTOR_ENCODING,
    VERSION,
    ExportReport,
    LineDigest,
    association_record,
    cooccurrence_record,
    cue_record,
    dumps,
    engram_record,
    link_record,
    open_text,
    ts,
)
from smriti.portable.source import Source, source_of
from smriti.progress import Progress, ProgressArg, progress_bar

if TYPE_CHECKING:
    from smriti.backend import StorageBackend
    from smriti.embedding import Embedder

log = get_logger(__name__)


def export_store(
    source: Source,
    path: str | os.PathLike[str],
    progress: ProgressArg = None,
    *,
    vectors: str = "base64",
) -> ExportReport:
    """Stream the user's whole graph into ``path`` (see the module docstring).

    ``source`` is an opened store (an Engine) or a StorageBackend. The file is written under a
    temporary name and renamed into place, so ``path`` is never half-written. The
    header counts the records written, kind by kind, like the trailer: the records go
    to a second temporary file first (the store may change while it is read: stores
    from other processes, associations made in the background), and the header is
    written in front of them once they are counted; the export needs room for both.
    ``progress``: None shows a progress line only when stderr is a terminal.
    ``vectors``: ``base64`` (default) or ``list`` (plain JSON numbers).
    """
    if vectors not in ("base64", "list"):
        raise InvalidInput(f"vectors must be 'base64' or 'list', not {vectors!r}")
    started = time.perf_counter()
    backend, embedder = source_of(source)
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    records = target.with_name(target.name + ".records.partial")
    # Counted before anything is read (the progress total): counting writes the
    # memories a backend still queues (Kùzu's write-behind) and folds co-occurrences.
    counts = backend.counts()
    engrams = backend.iter_engrams()
    first = next(engrams, None)
    header = _header(backend, embedder, first, counts)
    report = ExportReport(
        str(target),
        backend.user,
        header["embedding_model"],
        header["dims"],
        dict.fromkeys(KINDS, 0),
    )
    try:
        with (
            open_text(records, "w") as out,
            progress_bar(progress, "export", sum(header["counts"].values())) as bar,
        ):
            body = _DigestingWriter(out)
            report.tombstones = _write_tombstones(backend, body)
            stream = chain([first], engrams) if first is not None else iter(())
            _write_records(backend, stream, body, report, bar, vectors)
            trailer: dict[str, Any] = {"kind": "trailer", "counts": report.counts}
            if report.tombstones:
                trailer["tombstones"] = report.tombstones
            body.write(dumps(trailer))
            report.body_digest = body.digest.hexdigest()
        header["counts"] = dict(report.counts)  # what the file holds, as the trailer says
        with (
            open_text(partial, "w", gzipped=target.suffix == ".gz") as out,
            open(records, encoding="utf-8", newline="\n") as written,
        ):
            out.write(dumps(header))
            shutil.copyfileobj(written, out, 1 << 20)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
        records.unlink(missing_ok=True)
    report.bytes = target.stat().st_size
    report.seconds = time.perf_counter() - started
    log.info(
        "exported",
        path=str(target),
        user=backend.user,
        **report.counts,
        bytes=report.bytes,
        seconds=round(report.seconds, 3),
    )
    return report


class _DigestingWriter:
    """Writes lines to ``out`` and feeds them to a LineDigest."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.digest = LineDigest()

    def write(self, line: str) -> None:
        self.out.write(line)
        self.digest.update(line)


def _header(
    backend: StorageBackend,
    embedder: Embedder | None,
    first: Engram | None,
    counts: dict[str, int],
) -> dict[str, Any]:
    model = backend.get_meta(EMBEDDING_MODEL_KEY) or (embedder.model_id if embedder else None)
    dims: int | None = None
    if first is not None and first.embedding is not None:
        dims = int(np.asarray(first.embedding).size)
    elif embedder is not None:
        dims = embedder.dims
    from smriti import __version__

    return {
        "kind": "header",
        "format": FORMAT,
        "version": VERSION,
        "user": backend.user,
        "embedding_model": model,
        "dims": dims,
        "vector_encoding": VECTOR_ENCODING,
        "counts": counts,
        "created_at": ts(utcnow()),
        "smriti": __version__,
    }


def _write_tombstones(backend: StorageBackend, out: _DigestingWriter) -> int:
    """The store's tombstones, sorted by id, before the engrams (an importer knows
    which ids not to load before it meets them)."""
    stones = tombstones.load(backend)
    for key in sorted(stones):
        out.write(dumps({"kind": TOMBSTONE, **stones[key].to_record()}))
    return len(stones)


def _write_records(
    backend: StorageBackend,
    engrams: Iterator[Engram],
    out: _DigestingWriter,
    report: ExportReport,
    bar: Progress,
    vectors: str,
) -> None:
    counts = report.counts
    engram_ids: set[str] = set()
    for e in engrams:
        if report.dims is not None and e.embedding is not None and e.embedding.size != report.dims:
            raise BackendError(
                f"engram {e.id} has a {e.embedding.size}-d embedding but the store's vectors "
                f"are {report.dims}-d; the store mixes embedding models and cannot be exported"
            )
        out.write(dumps(engram_record(e, vectors)))
        engram_ids.add(e.id)
        counts["engrams"] += 1
        bar.advance()
    cue_ids: set[str] = set()
    for c in backend.iter_cues():
        out.write(dumps(cue_record(c, vectors)))
        cue_ids.add(c.id)
        counts["cues"] += 1
        bar.advance()
    edges: list[tuple[str, Iterator[Any], Any, set[str], set[str], Any]] = [
        (
            "links",
            backend.iter_links(),
            link_record,
            engram_ids,
            cue_ids,
            lambda x: (x.engram_id, x.cue_id),
        ),
        (
            "associations",
            backend.iter_associations(),
            association_record,
            engram_ids,
            engram_ids,
            lambda x: (x.source_id, x.target_id),
        ),
        (
            "cooccurrences",
            backend.iter_cooccurrences(),
            cooccurrence_record,
            cue_ids,
            cue_ids,
            lambda x: (x.source_id, x.target_id),
        ),
    ]
    for kind, items, encode, left, right, ends in edges:
        for item in items:
            a, b = ends(item)
            if a not in left or b not in right:  # written after its endpoints were read
                report.skipped_edges += 1
                continue
            out.write(dumps(encode(item)))
            counts[kind] += 1
            bar.advance()
    for key in EXPORTED_META_KEYS:
        value = backend.get_meta(key)
        if value is not None:
            out.write(dumps({"kind": "meta", "key": key, "value": value}))
