"""The operations a Smriti process asks of a memory: one handler per request type.

The same table serves a process that opened the engine itself (``LocalService``) and
the owner process answering others over its socket, so both give the same answers.
Each handler takes the engine, a typed request (``smriti.requests``, already checked)
and a progress factory, and returns a JSON-ready dict (the tool-facing shapes of
``smriti.mcp_server``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import NotFound
from smriti.model import ORIGIN_IMPORT_PREFIX
from smriti.progress import ProgressArg
from smriti.requests import (
    ClustersRequest,
    ConflictsRequest,
    ConsolidateRequest,
    CorrectRequest,
    DetailsRequest,
    DuplicatesRequest,
    ExportRequest,
    ExportToRequest,
    ForgetRequest,
    GetRequest,
    GraphRequest,
    GrowthRequest,
    HashRequest,
    HistoryRequest,
    ImportFromRequest,
    ImportRequest,
    ImportTextRequest,
    MergeRequest,
    PurgeRequest,
    RecallRequest,
    ReembedRequest,
    RelatedRequest,
    Request,
    StatsRequest,
    StoreRequest,
    SyncRequest,
    UpdateRequest,
)

if TYPE_CHECKING:
    from smriti.engine import Engine

#: A handler: the engine, one request of its type, a progress factory.
Handler = Callable[["Engine", Any, ProgressArg], dict[str, Any]]
#: The origin of memories a ``smriti import`` brings in (see ``import_store``).
IMPORT_ORIGIN = ORIGIN_IMPORT_PREFIX + "smriti"

#: Requests whose repetition changes nothing a user could tell (reads, a backup
#: push that merges, an export that rewrites its file, a store or a correction with
#: the new memory's id fixed by the client, an update that sets the same values again,
#: a forget that then says the memory is forgotten): sent again to a new owner when
#: the old one died before answering.
REPEATABLE: frozenset[type[Request]] = frozenset(
    {
        RecallRequest,
        StatsRequest,
        SyncRequest,
        ExportRequest,
        ExportToRequest,
        ImportFromRequest,
        ImportTextRequest,
        HashRequest,
        StoreRequest,
        ForgetRequest,
        PurgeRequest,
        GraphRequest,
        ClustersRequest,
        DetailsRequest,
        GrowthRequest,
        ConflictsRequest,
        GetRequest,
        HistoryRequest,
        RelatedRequest,
        UpdateRequest,
        CorrectRequest,
        DuplicatesRequest,
        MergeRequest,
    }
)


class _Claims:
    """Ids of stores (and corrections) being run, so that a repeated request waits for
    the first one instead of racing it (their check-then-write is not atomic)."""

    def __init__(self) -> None:
        self._busy: set[str] = set()
        self._cond = threading.Condition()

    def __call__(self, key: str) -> _Claim:
        return _Claim(self, key)


class _Claim:
    def __init__(self, claims: _Claims, key: str) -> None:
        self.claims, self.key = claims, key

    def __enter__(self) -> None:
        with self.claims._cond:
            while self.key in self.claims._busy:
                self.claims._cond.wait()
            self.claims._busy.add(self.key)

    def __exit__(self, *exc: object) -> None:
        with self.claims._cond:
            self.claims._busy.discard(self.key)
            self.claims._cond.notify_all()


_claims = _Claims()


def run(engine: Engine, request: Request, progress: ProgressArg = None) -> Any:
    """Run ``request`` on ``engine`` with the handler of its type."""
    return HANDLERS[type(request)](engine, request, progress)


def _store(engine: Engine, request: StoreRequest, progress: ProgressArg) -> dict[str, Any]:
    key = request.memory_id
    with _claims(key) if key else nullcontext():
        return engine.store(request).to_dict()


def _recall(engine: Engine, request: RecallRequest, progress: ProgressArg) -> dict[str, Any]:
    results = engine.recall(request)
    return {
        "results": [r.to_dict() for r in results],
        "degraded": bool(getattr(results, "degraded", False)),
        "warning": str(getattr(results, "warning", "") or ""),
        "next_cursor": getattr(results, "next_cursor", None),
    }


def _get(engine: Engine, request: GetRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.get(request)


def _correct(engine: Engine, request: CorrectRequest, progress: ProgressArg) -> dict[str, Any]:
    new_id = request.new_id
    # A repeated correction (the owner died before answering) carries the same new id:
    # it waits for the first one, then gets its result instead of a second version.
    with _claims(new_id) if new_id else nullcontext():
        return engine.correct(request)


def _purge(engine: Engine, request: PurgeRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.purge(request)


def _history(engine: Engine, request: HistoryRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.history(request)


def _update(engine: Engine, request: UpdateRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.update(request)


def _related(engine: Engine, request: RelatedRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.related(request)


def _duplicates(
    engine: Engine, request: DuplicatesRequest, progress: ProgressArg
) -> dict[str, Any]:
    return engine.duplicates(request)


def _merge(engine: Engine, request: MergeRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.merge(request)


def _forget(engine: Engine, request: ForgetRequest, progress: ProgressArg) -> dict[str, Any]:
    key = request.memory_id
    try:
        engram = engine.forget(request)
    except NotFound:
        if request.repeated and _tombstoned(engine, key):
            raise NotFound(
                f"memory {key} is forgotten, but the Smriti owner process stopped before "
                "it could say so; nothing else was changed"
            ) from None
        raise
    created = engram.created_at
    return {
        "id": engram.id,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "created_at": created.isoformat(),
    }


def _tombstoned(engine: Engine, key: str) -> bool:
    from smriti.portable import tombstones

    return key in tombstones.load(engine.backend)


def _consolidate(
    engine: Engine, request: ConsolidateRequest, progress: ProgressArg
) -> dict[str, Any]:
    return engine.consolidate(progress).to_dict()


def _sync(engine: Engine, request: SyncRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.sync(progress).to_dict()


def _stats(engine: Engine, request: StatsRequest, progress: ProgressArg) -> dict[str, Any]:
    return engine.stats()


def _export(engine: Engine, request: ExportRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.portable import export_store

    path = Path(request.path)
    return export_store(engine, path, progress, vectors=request.vectors).to_dict()


def _import(engine: Engine, request: ImportRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.portable import import_store

    path = Path(request.path)
    # Memories brought in by a user's import say so (unless their record names who said them).
    return import_store(engine, path, progress, merge=request.merge, origin=IMPORT_ORIGIN).to_dict()


def _import_from(
    engine: Engine, request: ImportFromRequest, progress: ProgressArg
) -> dict[str, Any]:
    from smriti.importers.run import import_file

    path = Path(request.path)
    return import_file(engine, request.fmt, path, request.dry_run, progress).to_dict()


def _import_text(
    engine: Engine, request: ImportTextRequest, progress: ProgressArg
) -> dict[str, Any]:
    from smriti.importers.run import import_text

    return import_text(engine, request.fmt, request.text, request.dry_run, progress).to_dict()


def _export_to(engine: Engine, request: ExportToRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.importers.run import export_file

    return export_file(engine, request.fmt, Path(request.path))


def _hash(engine: Engine, request: HashRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.portable import canonical_hash

    return {
        "user": engine.user,
        "canonical_hash": canonical_hash(engine),
        **engine.backend.counts(),
    }


def _reembed(engine: Engine, request: ReembedRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.engine.reembed import reembed
    from smriti.progress import progress_bar

    with progress_bar(progress, "re-embedding") as bar:
        report = reembed(engine, batch_size=request.batch_size, force=request.force, progress=bar)
    return report.to_dict()


def _graph(engine: Engine, request: GraphRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.graphview import DEFAULT_LIMIT
    from smriti.graphview.select import select_graph

    return select_graph(
        engine,
        cluster=request.cluster,
        around=request.around,
        hops=request.hops,
        limit=request.limit or DEFAULT_LIMIT,
    )


def _clusters(engine: Engine, request: ClustersRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.graphview.select import cluster_table

    return cluster_table(engine)


def _details(engine: Engine, request: DetailsRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.engine.details import memory_details

    return memory_details(engine, request.memory_id)


def _conflicts(engine: Engine, request: ConflictsRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.engine.tidy import conflicts_report

    return conflicts_report(engine, request.limit)


def _growth(engine: Engine, request: GrowthRequest, progress: ProgressArg) -> dict[str, Any]:
    from smriti.engine.growth import growth

    return growth(engine)


#: The handler of each request type.
HANDLERS: dict[type[Request], Handler] = {
    StoreRequest: _store,
    RecallRequest: _recall,
    ForgetRequest: _forget,
    PurgeRequest: _purge,
    GetRequest: _get,
    CorrectRequest: _correct,
    HistoryRequest: _history,
    UpdateRequest: _update,
    RelatedRequest: _related,
    DuplicatesRequest: _duplicates,
    MergeRequest: _merge,
    ConsolidateRequest: _consolidate,
    SyncRequest: _sync,
    StatsRequest: _stats,
    ExportRequest: _export,
    ImportRequest: _import,
    ImportFromRequest: _import_from,
    ImportTextRequest: _import_text,
    ExportToRequest: _export_to,
    HashRequest: _hash,
    ReembedRequest: _reembed,
    GraphRequest: _graph,
    ClustersRequest: _clusters,
    DetailsRequest: _details,
    GrowthRequest: _growth,
    ConflictsRequest: _conflicts,
}
