"""Streaming import of a portable export, batched, re-embedding when the model differs."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smriti import secrets
from smriti.errors import ConfigError, InvalidInput
from smriti.logs import get_logger
from smriti.model import CoOccurrence, Cue, Engram, Link
from smriti.portable import screening, tombstones
from smriti.portable.format import (
    EMBEDDING_MODEL_KEY,
    EXPORTED_META_KEYS,
    FORMAT,
    KINDS,
    READABLE_VERSIONS,
    TOMBSTONE,
    VERSION,
    ImportReport,
    LineDigest,
    association_from_record,
    cue_from_record,
    engram_from_record,
    open_text,
)
from smriti.portable.source import Source, mark_changed, secrets_policy, source_of
from smriti.portable.tombstones import Tombstone
from smriti.progress import Progress, ProgressArg, progress_bar

if TYPE_CHECKING:
    from smriti.backend import StorageBackend
    from smriti.embedding import Embedder

log = get_logger(__name__)

#: Records per ``import_records`` call (an engram comes with ~15 link, association and
#: co-occurrence records). On Kùzu the COPY of a call's links forces a checkpoint at
#: commit, and the checkpoint rewrites the engrams' embedding strings, so it costs more
#: as the store grows (~2 s per commit at 100k memories): few large calls restore much
#: faster than many small ones. The records of one call are held in memory (tens of MB
#: for 100,000 links). (Batches of 20,000 once lost CoOccurs edges on Kùzu; its import
#: now finds existing edges first and COPYs the rest, and bench/backup.py checks the
#: round trip hash.)
IMPORT_BATCH = 100_000
#: Engrams (the large records: content and vector) flush at this count at the latest.
ENGRAM_BATCH = 10_000
EMBED_BATCH = 256


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The validated header of an export file (InvalidInput when it is not one)."""
    with open_text(Path(path), "r") as f:
        line = f.readline()
    try:
        header = json.loads(line)
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidInput(f"{path} is not a Smriti export (first line is not a header)")
    version = header.get("version")
    if not isinstance(version, int) or version not in READABLE_VERSIONS:
        hint = "upgrade smriti to import it" if _is_newer(version) else "it is not valid"
        raise InvalidInput(
            f"{path} is export format version {version!r}; this Smriti reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}: {hint}"
        )
    return header


def _is_newer(version: object) -> bool:
    return isinstance(version, int) and version > VERSION


def read_trailer(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The trailer of an export file; InvalidInput when the file is truncated."""
    last = ""
    with open_text(Path(path), "r") as f:
        for line in f:  # streamed: memory stays flat for gzip and plain files alike
            if line.strip():
                last = line
    try:
        trailer = json.loads(last)
    except json.JSONDecodeError:
        trailer = None
    if not isinstance(trailer, dict) or trailer.get("kind") != "trailer":
        raise InvalidInput(f"{path} is truncated (no trailer line); re-export it")
    return trailer


#: Stores (by backend object) an import is running into: one at a time each, so that
#: the empty-store check and the import that relies on it are one step.
_IMPORTING: set[int] = set()
_IMPORTING_LOCK = threading.Lock()
#: Lines read between checks whether the import should stop (``Progress.checkpoint``).
CHECK_LINES = 1000


def import_store(
    target: Source,
    path: str | os.PathLike[str],
    progress: ProgressArg = None,
    *,
    merge: bool = False,
    origin: str | None = None,
) -> ImportReport:
    """Load an export file into ``target``, one import at a time per store (see
    ``_import`` for what it does).

    A second import while one runs is refused (InvalidInput), so two imports cannot
    both find the store empty. An import stops between batches when its progress
    says so (``Cancelled``: the process that asked for it left). The batches already
    written stay; the store is then no longer empty, and importing the same file with
    ``merge=True`` completes it (records with the same id replace those written).
    """
    backend, _ = source_of(target)
    with _IMPORTING_LOCK:
        if id(backend) in _IMPORTING:
            raise InvalidInput(
                f"an import into the store of user {backend.user!r} is already running; "
                "wait for it to finish, then try again"
            )
        _IMPORTING.add(id(backend))
    try:
        return _import(target, path, progress, merge=merge, origin=origin)
    finally:
        with _IMPORTING_LOCK:
            _IMPORTING.discard(id(backend))


def _import(
    target: Source,
    path: str | os.PathLike[str],
    progress: ProgressArg = None,
    *,
    merge: bool = False,
    origin: str | None = None,
) -> ImportReport:
    """Load an export file into ``target`` (an opened store such as an Engine, or a bare
    StorageBackend).

    Refuses a non-empty store unless ``merge`` is True; when merging, imported cues
    whose name already exists are merged into the existing cue, and records with an
    existing id replace the store's (backups use ``smriti.portable.merge`` instead,
    whose rules converge). Tombstones are honoured both ways: the file's are recorded
    and delete the memories they kill, and no memory a tombstone kills is loaded. When the file's
    embedding model differs from the engine's embedder, engram contents and cue names
    are re-embedded with the engine's embedder (a bare backend imports vectors as-is).
    Raises InvalidInput for a malformed, truncated or newer-format file (nothing is
    imported for a bad header or a truncated file). ``origin`` (``import:smriti`` for
    ``smriti import``) is given to the memories whose record names none; a record's
    own origin is kept (who said it first), and None keeps unknown ones unknown (a
    backup restore, which must round-trip exactly).
    """
    started = time.perf_counter()
    file = Path(path)
    backend, embedder = source_of(target)
    header = read_header(file)
    trailer = read_trailer(file)
    if (secrets_mode := secrets_policy(target)) == "refuse":
        screening.refuse_if_secrets(file)  # the whole file, before anything is written
    existing = backend.count_engrams()
    if existing and not merge:
        raise InvalidInput(
            f"the store of user {backend.user!r} already holds {existing} memories; import "
            "into an empty store, or merge into this one (--merge)"
        )
    source_model = header.get("embedding_model")
    target_model = _target_model(backend, embedder, source_model)
    re_embed = embedder is not None and source_model != target_model
    report = ImportReport(str(file), str(header.get("user")), source_model, target_model, re_embed)
    if re_embed:
        log.warning(
            "the export was embedded with another model: re-embedding engrams and cues",
            source_model=source_model,
            target_model=target_model,
        )
    loader = _Loader(backend, embedder if re_embed else None, existing > 0, report)
    loader.origin = origin
    loader.stones = tombstones.load(backend)
    loader.screen = screening.ImportScreen(secrets_mode, None if re_embed else embedder)
    dims = None if re_embed else header.get("dims")
    total = sum(int(v) for v in trailer.get("counts", {}).values())
    with open_text(file, "r") as f, progress_bar(progress, "import", total) as bar:
        loader.bar = bar
        f.readline()
        digest = LineDigest()
        for lineno, line in enumerate(f, start=2):
            if lineno % CHECK_LINES == 0:
                bar.checkpoint()
            digest.update(line)
            if line.strip():
                _import_line(loader, line, lineno, dims, merge)
        loader.flush()
    report.body_digest = digest.hexdigest()
    _check_counts(file, trailer, report)
    report.forgotten += _apply_tombstones(backend, loader.incoming)
    if backend.get_meta(EMBEDDING_MODEL_KEY) is None and target_model:
        backend.set_meta(EMBEDDING_MODEL_KEY, target_model)
    if embedder is not None:
        mark_changed(target)
    report.seconds = time.perf_counter() - started
    if loader.screen.kinds:
        log.warning("secrets and private text removed from the imported memories",
                    removed=secrets.summary(loader.screen.kinds))  # fmt: skip
    log.info(
        "imported",
        path=str(file),
        user=backend.user,
        source_user=report.source_user,
        re_embedded=re_embed,
        **report.counts,
        seconds=round(report.seconds, 3),
    )
    return report


def _target_model(
    backend: StorageBackend, embedder: Embedder | None, source_model: str | None
) -> str | None:
    stored = backend.get_meta(EMBEDDING_MODEL_KEY)
    if embedder is None:
        if stored and source_model and stored != source_model:
            raise ConfigError(
                f"the store holds vectors of {stored!r} but the export was embedded with "
                f"{source_model!r}; import through an engine configured for {stored!r}"
            )
        return stored or source_model
    current = embedder.model_id
    if stored and stored != current:
        raise ConfigError(
            f"this store's memories were embedded with {stored!r} but the configured "
            f"embedder is {current!r}; restore the previous embedding settings first"
        )
    return current


def _import_line(loader: _Loader, line: str, lineno: int, dims: int | None, merge: bool) -> None:
    try:
        record = json.loads(line)
        kind = record.get("kind")
        if kind == TOMBSTONE:
            loader.tombstone(Tombstone.from_record(record))
        elif kind == "engram":
            loader.add("engrams", _checked(engram_from_record(record), dims))
        elif kind == "cue":
            loader.add("cues", _checked(cue_from_record(record), dims))
        elif kind == "link":
            loader.add(
                "links",
                Link(
                    str(record["engram_id"]),
                    str(record["cue_id"]),
                    float(record.get("strength", 1.0)),
                ),
            )
        elif kind == "association":
            loader.add("associations", association_from_record(record))
        elif kind == "cooccurrence":
            loader.add(
                "cooccurrences",
                CoOccurrence(
                    str(record["source_id"]), str(record["target_id"]), float(record["strength"])
                ),
            )
        elif kind == "meta":
            if not merge and record.get("key") in EXPORTED_META_KEYS:
                loader.meta[str(record["key"])] = str(record["value"])
        elif kind not in ("trailer", "header"):
            log.warning("unknown record kind skipped", kind=kind, line=lineno)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInput(f"line {lineno} of the export is not a valid record: {exc}") from exc


def _apply_tombstones(backend: StorageBackend, incoming: dict[str, Tombstone]) -> int:
    """Record the file's tombstones and delete the local memories they kill."""
    if not incoming:
        return 0
    with tombstones.LOCK:
        tombstones.record(backend, incoming.values())
        doomed = [e.id for e in backend.get_engrams(list(incoming)) if incoming[e.id].kills(e)]
        return backend.delete_engrams(doomed) if doomed else 0


def _checked[T: (Engram, Cue)](item: T, dims: int | None) -> T:
    emb = item.embedding
    if dims is not None and emb is not None and emb.size != dims:
        raise ValueError(f"{item.id} has a {emb.size}-d embedding, the header says {dims}")
    return item


def _check_counts(file: Path, trailer: dict[str, Any], report: ImportReport) -> None:
    expected = {k: int(v) for k, v in trailer.get("counts", {}).items() if k in KINDS}
    got = {k: report.counts[k] for k in expected}
    if got != expected:
        raise InvalidInput(f"{file}: imported {got} but the trailer lists {expected}")


class _Loader:
    """Batches records into ``import_records`` calls, re-embedding and merging cues."""

    def __init__(
        self,
        backend: StorageBackend,
        embedder: Embedder | None,
        merge_cues: bool,
        report: ImportReport,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.merge_cues = merge_cues
        self.report = report
        self.pending: dict[str, list[Any]] = {k: [] for k in KINDS}
        self.size = 0
        self.cue_map: dict[str, str] = {}
        self.meta: dict[str, str] = {}
        self.bar: Progress | None = None
        #: Tombstones known (the store's and the file's) and those the file brought.
        self.stones: dict[str, Tombstone] = {}
        self.incoming: dict[str, Tombstone] = {}
        #: Engram ids left out because a tombstone kills them (their edges too).
        self.left_out: set[str] = set()
        self.screen = screening.ImportScreen("allow", None)
        #: The origin of imported memories whose record has none (None: left unknown).
        self.origin: str | None = None

    def tombstone(self, stone: Tombstone) -> None:
        """A tombstone record: remembered, and applied to the engrams that follow."""
        self.report.tombstones += 1
        self.incoming[stone.id] = stone
        merged = tombstones.combine(self.stones.get(stone.id), stone)
        assert merged is not None
        self.stones[stone.id] = merged

    def add(self, kind: str, item: Any) -> None:
        self.report.counts[kind] += 1
        if kind == "engrams":
            screened = self.screen.engram(item)
            if screened is None:  # it held nothing but <private> text
                self.left_out.add(item.id)
                return
            item = screened
            if self.origin and not item.origin:
                item = item.with_changes(origin=self.origin)
        if self._left_out(kind, item) or self._secret(kind, item):
            return
        self.pending[kind].append(item)
        self.size += 1
        if self.size >= IMPORT_BATCH or len(self.pending["engrams"]) >= ENGRAM_BATCH:
            self.flush()

    def _secret(self, kind: str, item: Any) -> bool:
        """A cue whose name holds a secret, or an edge of one, is left out."""
        if kind == "cues":
            return not self.screen.keeps_cue(item)
        dropped = self.screen.dropped_cues
        if not dropped:
            return False
        if kind == "links":
            return item.cue_id in dropped
        return kind == "cooccurrences" and (item.source_id in dropped or item.target_id in dropped)

    def _left_out(self, kind: str, item: Any) -> bool:
        if kind == "engrams":
            stone = self.stones.get(item.id)
            if stone is not None and stone.kills(item):
                self.left_out.add(item.id)
                self.report.forgotten += 1
                return True
            return False
        if not self.left_out:
            return False
        if kind == "links":
            return item.engram_id in self.left_out
        if kind == "associations":
            return item.source_id in self.left_out or item.target_id in self.left_out
        return False

    def flush(self) -> None:
        if self.bar is not None:
            self.bar.checkpoint()  # a batch is written whole or not at all
        p = self.pending
        if self.embedder is not None:
            p["engrams"] = self._re_embed(p["engrams"], [e.content for e in p["engrams"]])
            p["cues"] = self._re_embed(p["cues"], [c.name for c in p["cues"]])
        if self.merge_cues and p["cues"]:
            p["cues"] = self._merge(p["cues"])
        if self.cue_map:
            m = self.cue_map
            p["links"] = [
                Link(x.engram_id, m.get(x.cue_id, x.cue_id), x.strength) for x in p["links"]
            ]
            p["cooccurrences"] = [
                CoOccurrence(
                    m.get(x.source_id, x.source_id), m.get(x.target_id, x.target_id), x.strength
                )
                for x in p["cooccurrences"]
            ]
        if self.size:
            self.backend.import_records(*(p[k] for k in KINDS))
        for key, value in self.meta.items():
            self.backend.set_meta(key, value)
        self.meta.clear()
        if self.bar is not None:
            self.bar.advance(self.size)
        self.pending = {k: [] for k in KINDS}
        self.size = 0

    def _re_embed[T: (Engram, Cue)](self, items: list[T], texts: list[str]) -> list[T]:
        assert self.embedder is not None
        out: list[T] = []
        for start in range(0, len(items), EMBED_BATCH):
            vectors = self.embedder.embed(texts[start : start + EMBED_BATCH])
            for item, vector in zip(items[start : start + EMBED_BATCH], vectors, strict=True):
                item.embedding = np.asarray(vector, dtype=np.float32)
                out.append(item)
        return out

    def _merge(self, cues: list[Cue]) -> list[Cue]:
        existing = {c.name: c.id for c in self.backend.get_cues([c.name for c in cues])}
        keep: list[Cue] = []
        for cue in cues:
            found = existing.get(cue.name)
            if found is not None and found != cue.id:
                self.cue_map[cue.id] = found
                self.report.merged_cues += 1
            else:
                keep.append(cue)
        return keep
