"""Run an import: a reader's records stored through the engine's normal store path.

Every record becomes a ``StoreRequest`` (origin ``import:<format>``, its date as
``occurred_at``), so duplicates are merged by the store's rule and secrets are screened
as any store screens them. Each record's memory id is derived from the format, its key
and its content, so importing the same file again finds every memory already there and
adds nothing. Links between records become associations with their relation type.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti import secrets
from smriti.errors import InvalidInput
from smriti.importers.records import Imported, Rejected
from smriti.model import ORIGIN_IMPORT_PREFIX, Association, utcnow
from smriti.progress import ProgressArg, progress_bar
from smriti.requests import StoreRequest
from smriti.validation import MAX_TAG_CHARS, MAX_TAGS

if TYPE_CHECKING:
    from smriti.engine import Engine

#: Memories a dry run shows.
SAMPLE_SIZE = 5
#: Ids looked up per backend read when finding what a re-run already has.
LOOKUP_BATCH = 500
#: At most this many rejected records are listed in a report (all are counted).
REJECTED_SHOWN = 50
#: The strength of an association an import makes from a record's link.
LINK_STRENGTH = 1.0


@dataclass(slots=True)
class ImportReport:
    """What an import did (or, for a dry run, would do)."""

    format: str
    path: str
    dry_run: bool
    records: int = 0
    stored: int = 0
    already_there: int = 0
    merged: int = 0
    associations: int = 0
    redacted: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    sample: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready report."""
        return {
            "format": self.format,
            "path": self.path,
            "dry_run": self.dry_run,
            "records": self.records,
            "stored": self.stored,
            "already_there": self.already_there,
            "merged": self.merged,
            "associations": self.associations,
            "redacted": self.redacted,
            "rejected_count": len(self.rejected),
            "rejected": [
                {"where": r.where, "reason": r.reason} for r in self.rejected[:REJECTED_SHOWN]
            ],
            "sample": self.sample,
        }


def memory_id(fmt: str, record: Imported) -> str:
    """The id a record's memory gets: the same for the same record of the same format."""
    digest = hashlib.sha256(f"{fmt}\x00{record.key}\x00{record.content}".encode())
    return digest.hexdigest()[:32]


def reader_for(fmt: str) -> Any:
    """The reader registered for ``fmt``; InvalidInput naming the known formats."""
    from smriti.importers import READERS

    reader = READERS.get(fmt)
    if reader is None:
        known = ", ".join(sorted(READERS)) or "none"
        raise InvalidInput(f"unknown import format {fmt!r}; use one of: {known}")
    return reader


def import_file(
    engine: Engine, fmt: str, path: Path, dry_run: bool = False, progress: ProgressArg = None
) -> ImportReport:
    """Import the ``fmt`` file or folder at ``path`` into ``engine``'s store.

    The reader raises InvalidInput (one line, naming the expected format) when ``path``
    is not in the format; records it cannot read are reported by where they are while
    the others are imported. ``dry_run`` reads and checks everything, stores nothing,
    and reports the counts and a sample.
    """
    reader = reader_for(fmt)
    report = ImportReport(fmt, str(path), dry_run)
    requests: list[tuple[Imported, StoreRequest]] = []
    for item in reader(path):
        if isinstance(item, Rejected):
            report.rejected.append(item)
            continue
        try:
            requests.append((item, _request(engine, fmt, item, path)))
        except InvalidInput as exc:
            report.rejected.append(Rejected(item.key, str(exc)))
    report.records = len(requests) + len(report.rejected)
    known = _existing(engine, [r.memory_id for _, r in requests if r.memory_id])
    if dry_run:
        report.already_there = len(known)
        report.stored = len(requests) - len(known)
        report.sample = [_preview(item, r) for item, r in requests[:SAMPLE_SIZE]]
        return report
    ids, new = _store_all(engine, requests, known, report, progress)
    report.associations = _link(engine, [item for item, _ in requests], ids, new)
    return report


#: The file name a tool call's import text is read under, per format: the readers
#: recognise a file by its suffix, and the name is each memory's context.
TEXT_FILE_NAMES = {
    "mcp-memory": "memory.jsonl",
    "mcp-memory-service": "memories.json",
    "mem0": "memories.json",
    "markdown": "notes.md",
    "claude-code": "session.jsonl",
}


def import_text(
    engine: Engine, fmt: str, text: str, dry_run: bool = False, progress: ProgressArg = None
) -> ImportReport:
    """Import ``text``, one file's content in format ``fmt``, as ``import_file`` would
    import the file. The text is read from a private temporary folder, removed after."""
    name = TEXT_FILE_NAMES.get(fmt)
    if name is None:
        known = ", ".join(TEXT_FILE_NAMES)
        raise InvalidInput(f"format {fmt!r} cannot be imported from text; use one of: {known}")
    with tempfile.TemporaryDirectory(prefix="smriti-import-") as folder:  # mode 0700
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        try:
            report = import_file(engine, fmt, path, dry_run, progress)
        except InvalidInput as exc:  # name the text, not the temporary file
            raise InvalidInput(str(exc).replace(str(path), "the content")) from None
    report.path = f"(text of {name})"
    return report


def _request(engine: Engine, fmt: str, item: Imported, path: Path) -> StoreRequest:
    """The store request for one record (InvalidInput when a value cannot be stored)."""
    return StoreRequest.parse(
        item.content,
        0.5 if item.importance is None else item.importance,
        _tags(item),
        path.name[:200],
        memory_id(fmt, item),
        item.occurred_at,
        ORIGIN_IMPORT_PREFIX + fmt,
        max_chars=engine.settings.max_content_chars,
    )


def _tags(item: Imported) -> list[str]:
    """The record's tags, then its cue names: tags become context cues when stored.
    A cue name too long to be a tag is left to the extractor, which reads the text."""
    out: list[str] = []
    for name in (*item.tags, *item.cues):
        tag = " ".join(name.split())
        if tag and tag not in out and len(tag) <= MAX_TAG_CHARS:
            out.append(tag)
    return out[:MAX_TAGS]


def _existing(engine: Engine, ids: list[str]) -> set[str]:
    """Which of ``ids`` the store already holds (a re-run's memories)."""
    found: set[str] = set()
    for start in range(0, len(ids), LOOKUP_BATCH):
        batch = ids[start : start + LOOKUP_BATCH]
        found.update(e.id for e in engine.backend.get_engrams(batch, embeddings=False))
    return found


def _store_all(
    engine: Engine,
    requests: list[tuple[Imported, StoreRequest]],
    known: set[str],
    report: ImportReport,
    progress: ProgressArg,
) -> tuple[dict[str, str], set[str]]:
    """Store every request; returns each record key's memory id and the new ids."""
    ids: dict[str, str] = {}
    new: set[str] = set()
    with progress_bar(progress, f"importing {report.format}", len(requests)) as bar:
        for item, request in requests:
            try:
                outcome = engine.store(request)
            except InvalidInput as exc:  # e.g. a date in the future
                report.rejected.append(Rejected(item.key, str(exc)))
                bar.advance()
                continue
            ids[item.key] = outcome.engram.id
            report.redacted += sum(int(r.get("count", 0)) for r in outcome.redacted)  # type: ignore[call-overload]
            if request.memory_id in known:
                report.already_there += 1
            elif outcome.deduplicated:
                report.merged += 1
            else:
                report.stored += 1
                new.add(outcome.engram.id)
            bar.advance()
            bar.checkpoint()
    return ids, new


def _link(engine: Engine, items: list[Imported], ids: dict[str, str], new: set[str]) -> int:
    """Associations for the records' links; only those touching a memory stored by this
    run, so that a re-run adds no edge twice."""
    now = utcnow()
    edges: dict[tuple[str, str, str], Association] = {}
    for item in items:
        source = ids.get(item.key)
        for target_key, relation in item.links:
            target = ids.get(target_key)
            if source is None or target is None or source == target:
                continue
            if source in new or target in new:
                edges[(source, target, relation)] = Association(
                    source, target, LINK_STRENGTH, relation, now
                )
    if edges:
        with engine.writes.shared():
            engine.backend.import_records([], [], [], list(edges.values()), [])
        engine.dirty.set()  # the graph changed: the next consolidation sees the edges
    return len(edges)


def _preview(item: Imported, request: StoreRequest) -> dict[str, Any]:
    """One sampled record as a dry run shows it."""
    return {
        "key": item.key,
        "content": secrets.scrub(request.content)[:200],  # a preview shows no secret
        "tags": list(request.tags),
        "occurred_at": None if request.occurred_at is None else request.occurred_at.isoformat(),
        "links": [{"to": target, "relation": rel} for target, rel in item.links],
    }


#: The formats ``smriti export --to`` writes.
EXPORT_FORMATS = ("mcp-memory",)


def export_file(engine: Engine, fmt: str, path: Path) -> dict[str, Any]:
    """Write the user's memory to ``path`` in format ``fmt``; the counts written."""
    if fmt not in EXPORT_FORMATS:
        known = ", ".join(EXPORT_FORMATS)
        raise InvalidInput(f"cannot export to {fmt!r}; smriti export --to writes: {known}")
    from smriti.importers import mcp_memory

    return {"format": fmt, **mcp_memory.export_file(engine, path)}
