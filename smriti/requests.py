"""One typed request per operation: what a caller asks of a memory, checked once.

Each operation a memory serves (recall, store, every ``smriti_manage`` action, and the
CLI's export, import, hash, reembed, graph and clusters) has a frozen dataclass here.
Its ``parse`` classmethod builds it from loose values (an MCP tool's arguments, CLI
flags, a Python caller's keywords) with the rules of ``smriti.validation`` and raises
InvalidInput naming the argument that is wrong. A parsed request is valid, and the
layers below take it as it is:

    MCP tool / CLI command ── parse ──▶ Service.run(request)
        ├─ in this process: ops.run(engine, request) ──▶ Engine.recall(request) ...
        └─ through the owner: {"op": request.op, "args": request.to_wire()}
           ── owner: decode(op, args, settings) ──▶ ops.run(engine, request) ...

The wire form is plain JSON (lists for tuples, ISO 8601 text for times) and has the
keys the owner protocol always had, so ``decode`` is the same ``parse`` again: the
owner trusts a socket only as far as the process at its other end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Self

from smriti import validation
from smriti.errors import InvalidInput
from smriti.model import ORIGIN_AGENT

if TYPE_CHECKING:
    from smriti.config import Settings

#: The most memories ``RelatedRequest`` may ask for (and the edges the engine reads to
#: find them, ``smriti.engine.versions``).
RELATED_MAX = 100
#: ``RelatedRequest``'s default number of memories.
RELATED_LIMIT = 10


@dataclass(frozen=True, slots=True)
class Request:
    """The base of every request: its operation name and its wire form."""

    #: The operation's name on the owner protocol (``smriti.owner.protocol``).
    op: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        """The request's fields as JSON-ready values (tuples as lists, times as ISO
        8601 text); ``decode`` turns them back into this request."""
        return {f.name: _wire(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any], settings: Settings) -> Self:
        """The request whose wire form is ``args``, checked as ``parse`` checks it
        (keys it does not know are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls.parse(**{k: v for k, v in args.items() if k in names})  # type: ignore[attr-defined, no-any-return]


def _wire(value: object) -> object:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _tags_or_none(value: object) -> tuple[str, ...] | None:
    """Tags to set (None: keep the memory's own)."""
    return None if value is None else tuple(validation.tags(value))


def _importance_or_none(value: object) -> float | None:
    return None if value is None else validation.importance(value)


@dataclass(frozen=True, slots=True)
class RecallRequest(Request):
    """Recall memories (SPEC §6): ``mode`` recall (associative), search (vectors only)
    or list (most recently used; also when ``query`` is None). Every filter applies
    before the limit: ``memory_type``; ``tags``, any of them or, with ``tag_match``
    ``all``, every one; ``since`` <= created_at < ``until``; old versions only with
    ``include_superseded``; ``origin``, exact or a prefix such as ``import:``.
    ``cursor`` continues a list (the ``next_cursor`` of the page before)."""

    op: ClassVar[str] = "recall"

    query: str | None = None
    limit: int = 5
    mode: str = "recall"
    memory_type: str | None = None
    tags: tuple[str, ...] = ()
    tag_match: str = "any"
    since: datetime | None = None
    until: datetime | None = None
    include_superseded: bool = False
    cursor: str | None = None
    origin: str | None = None

    @property
    def lists(self) -> bool:
        """Whether this recall lists recent memories (mode list, or no query)."""
        return self.mode == "list" or self.query is None

    @property
    def shown_mode(self) -> str:
        """The mode the answer reports: ``list`` when there is no query."""
        return "list" if self.query is None else self.mode

    @classmethod
    def parse(
        cls,
        query: object = None,
        limit: object = 5,
        mode: object = "recall",
        memory_type: object = None,
        tags: object = None,
        tag_match: object = "any",
        since: object = None,
        until: object = None,
        include_superseded: object = False,
        cursor: object = None,
        origin: object = None,
        *,
        max_limit: int,
    ) -> RecallRequest:
        """The checked request; ``max_limit`` is the largest ``limit`` allowed
        (``SMRITI_MAX_RECALL_LIMIT``). InvalidInput names the argument that is wrong."""
        text = validation.query(query)
        count = validation.limit(limit, max_limit)
        how = validation.mode(mode)
        chosen = tuple(validation.tags(tags))
        start, end = validation.moment(since, "since"), validation.moment(until, "until")
        if start is not None and end is not None and start >= end:
            raise InvalidInput(
                f"since ({start.isoformat()}) must be before until ({end.isoformat()})"
            )
        request = cls(
            text, count, how, validation.memory_type(memory_type), chosen,
            validation.tag_match(tag_match), start, end,
            validation.flag(include_superseded, "include_superseded"), _cursor(cursor),
            validation.origin_filter(origin),
        )  # fmt: skip
        if request.cursor is not None and not request.lists:
            raise InvalidInput("cursor pages a list (mode=list or an empty query); drop it here")
        return request

    @classmethod
    def from_wire(cls, args: Mapping[str, Any], settings: Settings) -> RecallRequest:
        """The request whose wire form is ``args``, checked as ``parse`` checks it."""
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in args.items() if k in names}
        return cls.parse(**known, max_limit=settings.max_recall_limit)


def _cursor(value: object) -> str | None:
    """A list cursor: an opaque string (the engine checks whose and for what it is)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidInput("cursor must be the next_cursor string of the previous list call")
    return value.strip()


@dataclass(frozen=True, slots=True)
class StoreRequest(Request):
    """Remember ``content`` (SPEC §5). ``memory_id`` makes a repeated store idempotent
    (the owner client fixes one before sending); ``occurred_at`` dates an event stored
    after the fact; ``origin`` says who said it and ``principal`` is the authenticated
    caller storing it ("" for none)."""

    op: ClassVar[str] = "store"

    content: str
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    source: str = ""
    memory_id: str | None = None
    occurred_at: datetime | None = None
    origin: str = ORIGIN_AGENT
    principal: str = ""

    @classmethod
    def parse(
        cls,
        content: object,
        importance: object = 0.5,
        tags: object = None,
        source: object = None,
        memory_id: object = None,
        occurred_at: object = None,
        origin: object = ORIGIN_AGENT,
        principal: object = None,
        *,
        max_chars: int,
    ) -> StoreRequest:
        """The checked request; ``max_chars`` is the longest content allowed
        (``SMRITI_MAX_CONTENT_CHARS``). Whether ``occurred_at`` lies in the future is
        the engine's to say, when it stores."""
        weight = validation.importance(importance)
        happened = validation.moment(occurred_at, "occurred_at")
        said = validation.origin(ORIGIN_AGENT if origin is None else origin)
        return cls(
            validation.content(content, max_chars), weight, tuple(validation.tags(tags)),
            validation.source(source),
            None if memory_id is None else validation.new_memory_id(memory_id),
            happened, said, validation.principal(principal),
        )  # fmt: skip

    @classmethod
    def from_wire(cls, args: Mapping[str, Any], settings: Settings) -> StoreRequest:
        """The request whose wire form is ``args``, checked as ``parse`` checks it."""
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in args.items() if k in names}
        return cls.parse(**known, max_chars=settings.max_content_chars)


@dataclass(frozen=True, slots=True)
class GetRequest(Request):
    """One memory by id, with its cues, associations and version chain."""

    op: ClassVar[str] = "get"
    memory_id: str

    @classmethod
    def parse(cls, memory_id: object) -> GetRequest:
        """The checked request."""
        return cls(validation.memory_id(memory_id, "get"))


@dataclass(frozen=True, slots=True)
class HistoryRequest(Request):
    """The version chain of a memory, oldest first."""

    op: ClassVar[str] = "history"
    memory_id: str

    @classmethod
    def parse(cls, memory_id: object) -> HistoryRequest:
        """The checked request."""
        return cls(validation.memory_id(memory_id, "show the history of"))


@dataclass(frozen=True, slots=True)
class ForgetRequest(Request):
    """Delete one of the user's memories. ``repeated``: sent again after the owner
    process died before answering (a NotFound then says the memory is forgotten)."""

    op: ClassVar[str] = "forget"
    memory_id: str
    repeated: bool = False

    @classmethod
    def parse(cls, memory_id: object, repeated: object = False) -> ForgetRequest:
        """The checked request."""
        return cls(validation.memory_id(memory_id), bool(repeated))


@dataclass(frozen=True, slots=True)
class PurgeRequest(Request):
    """Forget a memory, erase it from the store's files and from the backup's history."""

    op: ClassVar[str] = "purge"
    memory_id: str

    @classmethod
    def parse(cls, memory_id: object) -> PurgeRequest:
        """The checked request."""
        return cls(validation.memory_id(memory_id, "purge"))


@dataclass(frozen=True, slots=True)
class CorrectRequest(Request):
    """Replace a memory by a corrected version that supersedes it. ``importance``,
    ``tags`` and ``origin`` of None keep the old version's; ``new_id`` is the new
    version's id (a Service chooses one when it is None, so that a request sent again
    corrects once); ``purge`` forgets and erases the earlier versions."""

    op: ClassVar[str] = "correct"

    memory_id: str
    content: str
    importance: float | None = None
    tags: tuple[str, ...] | None = None
    new_id: str | None = None
    origin: str | None = None
    principal: str = ""
    purge: bool = False

    @classmethod
    def parse(
        cls,
        memory_id: object,
        content: object,
        importance: object = None,
        tags: object = None,
        new_id: object = None,
        origin: object = None,
        principal: object = None,
        purge: object = False,
    ) -> CorrectRequest:
        """The checked request (the content's length is checked when it is stored)."""
        if not isinstance(content, str):
            raise InvalidInput(f"content must be a string, got {type(content).__name__}")
        return cls(
            validation.memory_id(memory_id, "correct"), content,
            _importance_or_none(importance), _tags_or_none(tags),
            None if new_id is None else validation.new_memory_id(new_id),
            None if origin is None else validation.origin(origin),
            validation.principal(principal), validation.flag(purge, "purge"),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class UpdateRequest(Request):
    """Change a memory's importance and/or its whole tag list in place."""

    op: ClassVar[str] = "update"

    memory_id: str
    importance: float | None = None
    tags: tuple[str, ...] | None = None

    @classmethod
    def parse(
        cls, memory_id: object, importance: object = None, tags: object = None
    ) -> UpdateRequest:
        """The checked request; InvalidInput when it changes nothing."""
        key = validation.memory_id(memory_id, "update")
        if importance is None and tags is None:
            raise InvalidInput("give importance and/or tags to update")
        return cls(key, _importance_or_none(importance), _tags_or_none(tags))


@dataclass(frozen=True, slots=True)
class RelatedRequest(Request):
    """Memories linked to one, best first."""

    op: ClassVar[str] = "related"

    memory_id: str
    limit: int = RELATED_LIMIT

    @classmethod
    def parse(cls, memory_id: object, limit: object = RELATED_LIMIT) -> RelatedRequest:
        """The checked request (``limit`` at most RELATED_MAX)."""
        key = validation.memory_id(memory_id, "find what is related to")
        return cls(key, validation.limit(limit, RELATED_MAX))


@dataclass(frozen=True, slots=True)
class DuplicatesRequest(Request):
    """Groups of near-duplicate memories and stale ones (``smriti.engine.tidy``, which
    also says what None means for each field and which values it takes)."""

    op: ClassVar[str] = "duplicates"

    threshold: float | None = None
    limit: int | None = None
    stale_days: int | None = None

    @classmethod
    def parse(
        cls, threshold: object = None, limit: object = None, stale_days: object = None
    ) -> DuplicatesRequest:
        """The request; its values are checked by the engine, which knows their ranges."""
        return cls(threshold, limit, stale_days)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class MergeRequest(Request):
    """Fold the memories ``memory_ids`` into ``memory_id``."""

    op: ClassVar[str] = "merge"

    memory_id: str
    memory_ids: tuple[str, ...]

    @classmethod
    def parse(cls, memory_id: object, memory_ids: object) -> MergeRequest:
        """The checked request: a list of ids or one comma-separated string."""
        raw = memory_ids.split(",") if isinstance(memory_ids, str) else memory_ids
        if not isinstance(raw, list | tuple) or not raw:
            raise InvalidInput("give the ids of the memories to merge into memory_id (memory_ids)")
        ids = tuple(dict.fromkeys(validation.memory_id(str(i).strip(), "merge") for i in raw))
        return cls(validation.memory_id(memory_id, "merge into"), ids)


@dataclass(frozen=True, slots=True)
class StatsRequest(Request):
    """Counts and the components in use."""

    op: ClassVar[str] = "stats"

    @classmethod
    def parse(cls) -> StatsRequest:
        """The request."""
        return cls()


@dataclass(frozen=True, slots=True)
class ConsolidateRequest(Request):
    """Run consolidation now (SPEC §7)."""

    op: ClassVar[str] = "consolidate"

    @classmethod
    def parse(cls) -> ConsolidateRequest:
        """The request."""
        return cls()


@dataclass(frozen=True, slots=True)
class SyncRequest(Request):
    """Push a backup now."""

    op: ClassVar[str] = "sync"

    @classmethod
    def parse(cls) -> SyncRequest:
        """The request."""
        return cls()


# -- the CLI's maintenance operations ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportRequest(Request):
    """Write the user's memory to ``path`` (absolute: the owner may run elsewhere);
    ``vectors`` ``base64`` or ``list`` (``smriti.portable``)."""

    op: ClassVar[str] = "export"

    path: str
    vectors: str = "base64"

    @classmethod
    def parse(cls, path: object, vectors: object = "base64") -> ExportRequest:
        """The request (the file was checked by the command, the format by the export)."""
        return cls(str(path), str(vectors))


@dataclass(frozen=True, slots=True)
class ImportRequest(Request):
    """Load the export at ``path`` into the user's store (``merge``: into what is
    there, else into an empty store)."""

    op: ClassVar[str] = "import"

    path: str
    merge: bool = False

    @classmethod
    def parse(cls, path: object, merge: object = False) -> ImportRequest:
        """The request (the file was checked by the command)."""
        return cls(str(path), bool(merge))


@dataclass(frozen=True, slots=True)
class ImportFromRequest(Request):
    """Import the file or folder at ``path`` (absolute) written by another memory tool,
    in format ``fmt`` (``smriti.importers.READERS``); ``dry_run`` previews it."""

    op: ClassVar[str] = "import_from"

    fmt: str
    path: str
    dry_run: bool = False

    @classmethod
    def parse(cls, fmt: object, path: object, dry_run: object = False) -> ImportFromRequest:
        """The request (the reader checks the file, the importer the format's name)."""
        if not isinstance(fmt, str) or not fmt.strip():
            raise InvalidInput("give the format to import from, e.g. --from mcp-memory")
        return cls(fmt.strip().lower(), str(path), validation.flag(dry_run, "dry_run"))


#: The formats a ``smriti_manage`` import takes inline: those whose export is one file.
TEXT_IMPORT_FORMATS = ("mcp-memory", "mcp-memory-service", "mem0", "markdown", "claude-code")
#: The most text one ``smriti_manage`` import takes (a larger file: ``smriti import --from``):
#: with its JSON escaping, a call this size stays under the 4 MiB request body an HTTP
#: server accepts.
MAX_IMPORT_TEXT_CHARS = 2_000_000


@dataclass(frozen=True, slots=True)
class ImportTextRequest(Request):
    """Import ``text``, the content of one file another memory tool wrote, in format
    ``fmt`` (one of ``TEXT_IMPORT_FORMATS``); ``dry_run`` previews it. The tool call's
    form of ``ImportFromRequest``: the file travels in the request, so a team server
    never reads a path a client names."""

    op: ClassVar[str] = "import_text"

    fmt: str
    text: str
    dry_run: bool = False

    @classmethod
    def parse(cls, fmt: object, text: object, dry_run: object = False) -> ImportTextRequest:
        """The request; InvalidInput naming the formats, or the text's limit."""
        chosen = fmt.strip().lower() if isinstance(fmt, str) else ""
        if chosen not in TEXT_IMPORT_FORMATS:
            raise InvalidInput(
                f"format must be one of {', '.join(TEXT_IMPORT_FORMATS)} for an import "
                f"by tool call (basic-memory is a folder: use smriti import --from "
                f"basic-memory PATH); got {str(fmt)[:40]!r}"
            )
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("content is required for action=import: the file's text")
        if len(text) > MAX_IMPORT_TEXT_CHARS:
            raise InvalidInput(
                f"content is {len(text):,} characters; an import by tool call takes at "
                f"most {MAX_IMPORT_TEXT_CHARS:,} (use smriti import --from {chosen} PATH)"
            )
        return cls(chosen, text, validation.flag(dry_run, "dry_run"))


@dataclass(frozen=True, slots=True)
class ExportToRequest(Request):
    """Write the user's memory to ``path`` (absolute) in another tool's format ``fmt``."""

    op: ClassVar[str] = "export_to"

    fmt: str
    path: str

    @classmethod
    def parse(cls, fmt: object, path: object) -> ExportToRequest:
        """The request (the file was checked by the command)."""
        if not isinstance(fmt, str) or not fmt.strip():
            raise InvalidInput("give the format to export to: --to mcp-memory")
        return cls(fmt.strip().lower(), str(path))


@dataclass(frozen=True, slots=True)
class HashRequest(Request):
    """The canonical hash of the user's store, with its counts."""

    op: ClassVar[str] = "hash"

    @classmethod
    def parse(cls) -> HashRequest:
        """The request."""
        return cls()


@dataclass(frozen=True, slots=True)
class ReembedRequest(Request):
    """Embed every memory and cue again with the configured embedder."""

    op: ClassVar[str] = "reembed"

    batch_size: int = 256
    force: bool = False

    @classmethod
    def parse(cls, batch_size: object = 256, force: object = False) -> ReembedRequest:
        """The request."""
        return cls(int(batch_size), bool(force))  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class GraphRequest(Request):
    """The part of the memory graph to draw: one ``cluster``, the memories ``hops``
    around the memory ``around``, or the strongest; at most ``limit`` memories (None:
    ``smriti.graphview.DEFAULT_LIMIT``)."""

    op: ClassVar[str] = "graph"

    cluster: int | None = None
    around: str | None = None
    hops: int = 2
    limit: int | None = None

    @classmethod
    def parse(
        cls, cluster: object = None, around: object = None, hops: object = 2, limit: object = None
    ) -> GraphRequest:
        """The request."""
        return cls(
            None if cluster is None else int(cluster),  # type: ignore[call-overload]
            str(around) if around else None,
            int(hops),  # type: ignore[call-overload]
            int(limit) if limit else None,  # type: ignore[call-overload]
        )


@dataclass(frozen=True, slots=True)
class ConflictsRequest(Request):
    """Groups of memories linked as possible conflicts (``smriti.engine.tidy``)."""

    op: ClassVar[str] = "conflicts"

    limit: int | None = None

    @classmethod
    def parse(cls, limit: object = None) -> ConflictsRequest:
        """The request; the engine checks ``limit`` (None: its default)."""
        return cls(limit)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class GrowthRequest(Request):
    """How many memories were created each month (``smriti.engine.growth``)."""

    op: ClassVar[str] = "growth"

    @classmethod
    def parse(cls) -> GrowthRequest:
        """The request."""
        return cls()


@dataclass(frozen=True, slots=True)
class ClustersRequest(Request):
    """The table of the user's Leiden clusters."""

    op: ClassVar[str] = "clusters"

    @classmethod
    def parse(cls) -> ClustersRequest:
        """The request."""
        return cls()


@dataclass(frozen=True, slots=True)
class DetailsRequest(Request):
    """One memory in full, for a page or resource showing it
    (``smriti.engine.details.memory_details``)."""

    op: ClassVar[str] = "details"
    memory_id: str

    @classmethod
    def parse(cls, memory_id: object) -> DetailsRequest:
        """The checked request."""
        return cls(validation.memory_id(memory_id, "show"))


#: What a manage tool call may ask.
ManageRequest = (
    GetRequest
    | CorrectRequest
    | HistoryRequest
    | UpdateRequest
    | RelatedRequest
    | DuplicatesRequest
    | MergeRequest
    | ForgetRequest
    | PurgeRequest
    | StatsRequest
    | ConsolidateRequest
    | SyncRequest
)

#: Every request type, by its operation name on the owner protocol.
REQUESTS: dict[str, type[Request]] = {
    cls.op: cls
    for cls in (
        RecallRequest,
        StoreRequest,
        GetRequest,
        CorrectRequest,
        HistoryRequest,
        UpdateRequest,
        RelatedRequest,
        DuplicatesRequest,
        MergeRequest,
        ForgetRequest,
        PurgeRequest,
        StatsRequest,
        ConsolidateRequest,
        SyncRequest,
        ExportRequest,
        ImportRequest,
        ImportFromRequest,
        ImportTextRequest,
        ExportToRequest,
        HashRequest,
        ReembedRequest,
        GraphRequest,
        ClustersRequest,
        DetailsRequest,
        GrowthRequest,
        ConflictsRequest,
    )
}


def decode(op: str, args: Mapping[str, Any], settings: Settings) -> Request:
    """The request a message of the owner protocol carries (``op`` and its wire form
    ``args``), checked; InvalidInput for an unknown operation or a bad value."""
    cls = REQUESTS.get(op)
    if cls is None:
        raise InvalidInput(f"unknown operation {op!r}")
    return cls.from_wire(args, settings)
