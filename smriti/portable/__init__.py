"""Portable export and import of one user's memory graph (versioned JSON Lines).

The file is UTF-8 JSON Lines, one JSON object per line, each with a ``kind``:

1. ``header``: ``{"kind": "header", "format": "smriti-export", "version": 2, "user",
   "embedding_model", "dims", "vector_encoding", "counts", "created_at", "smriti"}``.
   ``counts`` are the store's counts when the export started.
2. ``engram`` records (every property; ``embedding`` see below; the version fields
   see below), then ``cue`` records,
   then ``link`` (EncodedBy: ``engram_id``, ``cue_id``, ``strength``), ``association``
   (AssociatedWith: ``source_id``, ``target_id``, ``strength``, ``relation_type``,
   ``created_at``), ``cooccurrence`` (CoOccurs between cue ids) and ``meta`` records.
   Nodes always come before the edges that use them.
3. ``trailer``: ``{"kind": "trailer", "counts": {...}}`` with what was written (plus
   ``"tombstones": n`` when there are any). A file without a trailer is truncated and
   is refused before anything is imported.

Forgotten memories travel as ``tombstone`` records right after the header (``{"kind":
"tombstone", "id", "type": "forget" | "prune", "at"[, "last_accessed_at",
"access_count"]}``, see ``smriti.portable.tombstones``): an import records them and
neither loads nor keeps a memory they kill. Files without tombstones are read as
before, and older readers skip the kind with a warning.

Version 2 added the version chain of a correction: an engram record carries
``supersedes`` (the id of the memory it corrected), ``superseded_by`` (the id of the
memory that corrected it) and ``superseded_at`` (when, ISO 8601), each written only when
set. A memory never corrected therefore has the same line as in version 1 (an upgraded
machine's unchanged store exports its old snapshot's body digest exactly), and a version
1 file imports with the defaults (``""``, ``""``, None). The version number went up
anyway so that a Smriti that reads only version 1 refuses a version 2 file ("upgrade
smriti") instead of importing superseded memories as current ones. Associations of any
``relation_type`` (``supersedes`` and ``conflicts`` included) travel unchanged.

Who said a memory travels in two optional fields of its record, ``origin`` (``user``,
``agent``, ``import:<format>``, ``tool``) and ``principal`` (the authenticated caller
that stored it), written only when set, within version 2: a reader that predates them
skips them (nothing is lost that it could use), and a file without them imports with
``""`` (unknown). ``smriti import`` gives ``import:smriti`` to the memories whose record
names no origin; a backup restore keeps the file's exactly.
``smriti.portable.merge`` merges a file into a non-empty store with rules that make
machines converge (backups use it before every push).

Embeddings are written as base64 of little-endian float32 bytes
(``vector_encoding: "base64-float32-le"``): a 384-d vector takes 2 KB instead of ~8 KB
of decimal text, encodes and decodes an order of magnitude faster, and round-trips
bit-exactly. Import also accepts plain lists of numbers. Timestamps are ISO 8601 with
an explicit UTC offset; naive timestamps are refused. A path ending in ``.gz`` is
gzip-compressed (import detects gzip by its magic bytes).

Export and import stream: records are written as they are read from the store, and
imported through ``StorageBackend.import_records`` in bounded batches (``IMPORT_BATCH``
records, at most ``ENGRAM_BATCH`` engrams), so memory stays flat whatever the store size.
Edges whose endpoints were not exported (written concurrently with the export) are left
out, so the file is always a referentially consistent graph.

Importing a file made with another embedding model re-embeds engram contents and cue
names with the target engine's embedder: vectors of two models (or two dimensions) are
never mixed in one store. ``canonical_hash`` fingerprints a store's graph so a restore
can be verified against the original.
"""

from smriti.portable.canonical import canonical_hash
from smriti.portable.export import export_store
from smriti.portable.format import FORMAT, VERSION, ExportReport, ImportReport
from smriti.portable.importer import import_store, read_header, read_trailer

__all__ = [
    "FORMAT",
    "VERSION",
    "ExportReport",
    "ImportReport",
    "canonical_hash",
    "export_store",
    "import_store",
    "read_header",
    "read_trailer",
]
