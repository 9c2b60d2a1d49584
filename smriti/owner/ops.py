"""The operations a Smriti process asks of a memory, by name, with JSON arguments.

The same table serves a process that opened the engine itself (``LocalService``) and
the owner process answering others over its socket, so both give the same answers.
Each operation takes the engine, its arguments and a progress factory, and returns a
JSON-ready dict (the tool-facing shapes of ``smriti.mcp_server``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import InvalidInput, NotFound
from smriti.model import ORIGIN_AGENT, ORIGIN_IMPORT_PREFIX
from smriti.progress import ProgressArg

if TYPE_CHECKING:
    from smriti.engine import Engine

Op = Callable[["Engine", Mapping[str, Any], ProgressArg], dict[str, Any]]
#: The origin of memories a ``smriti import`` brings in (see ``import_store``).
IMPORT_ORIGIN = ORIGIN_IMPORT_PREFIX + "smriti"

#: Operations whose repetition changes nothing a user could tell (reads, a backup
#: push that merges, an export that rewrites its file, a store or a correction with
#: the new memory's id fixed by the client, an update that sets the same values again,
#: a forget that then says the memory is forgotten): sent again to a new owner when
#: the old one died before answering.
REPEATABLE = frozenset(
    {
        "recall",
        "stats",
        "sync",
        "export",
        "hash",
        "store",
        "forget",
        "purge",
        "status",
        "graph",
        "clusters",
        "get",
        "history",
        "related",
        "update",
        "correct",
        "duplicates",
        "merge",
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


def run(engine: Engine, op: str, args: Mapping[str, Any], progress: ProgressArg = None) -> Any:
    """Run operation ``op``; InvalidInput for an unknown one."""
    fn = OPS.get(op)
    if fn is None:
        raise InvalidInput(f"unknown operation {op!r}")
    return fn(engine, args, progress)


def _store(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    memory_id = args.get("memory_id")
    with _claims(str(memory_id)) if memory_id else nullcontext():
        outcome = engine.store(
            args.get("content"),
            importance=args.get("importance", 0.5),
            tags=args.get("tags"),
            source=args.get("source"),
            memory_id=memory_id,
            occurred_at=args.get("occurred_at"),
            origin=args.get("origin") or ORIGIN_AGENT,
            principal=args.get("principal"),
        )
    return outcome.to_dict()


def _recall(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    results = engine.recall(
        args.get("query"),
        limit=args.get("limit", 5),
        mode=args.get("mode", "recall"),
        memory_type=args.get("memory_type"),
        tags=args.get("tags"),
        tag_match=args.get("tag_match", "any"),
        since=args.get("since"),
        until=args.get("until"),
        include_superseded=args.get("include_superseded", False),
        cursor=args.get("cursor"),
        origin=args.get("origin"),
    )
    return {
        "results": [r.to_dict() for r in results],
        "degraded": bool(getattr(results, "degraded", False)),
        "warning": str(getattr(results, "warning", "") or ""),
        "next_cursor": getattr(results, "next_cursor", None),
    }


def _get(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.get(args.get("memory_id"))


def _correct(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    new_id = args.get("new_id")
    # A repeated correction (the owner died before answering) carries the same new id:
    # it waits for the first one, then gets its result instead of a second version.
    with _claims(str(new_id)) if new_id else nullcontext():
        return engine.correct(
            args.get("memory_id"),
            args.get("content"),
            importance=args.get("importance"),
            tags=args.get("tags"),
            new_memory_id=new_id,
            origin=args.get("origin"),
            principal=args.get("principal"),
            purge=args.get("purge", False),
        )


def _purge(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.purge(args.get("memory_id"))


def _history(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.history(args.get("memory_id"))


def _update(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.update(
        args.get("memory_id"), importance=args.get("importance"), tags=args.get("tags")
    )


def _related(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.related(args.get("memory_id"), limit=args.get("limit", 10))


def _duplicates(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.duplicates(args.get("threshold"), args.get("limit"), args.get("stale_days"))


def _merge(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.merge(args.get("memory_id"), args.get("memory_ids"))


def _forget(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    key = args.get("memory_id")
    try:
        engram = engine.forget(key)
    except NotFound:
        if args.get("repeated") and _tombstoned(engine, key):
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


def _tombstoned(engine: Engine, key: object) -> bool:
    from smriti.portable import tombstones

    return isinstance(key, str) and key.strip() in tombstones.load(engine.backend)


def _consolidate(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.consolidate(progress).to_dict()


def _sync(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.sync(progress).to_dict()


def _stats(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    return engine.stats()


def _export(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    from smriti.portable import export_store

    path = Path(str(args["path"]))
    vectors = str(args.get("vectors", "base64"))
    return export_store(engine, path, progress, vectors=vectors).to_dict()


def _import(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    from smriti.portable import import_store

    path = Path(str(args["path"]))
    merge = bool(args.get("merge"))
    # Memories brought in by a user's import say so (unless their record names who said them).
    return import_store(engine, path, progress, merge=merge, origin=IMPORT_ORIGIN).to_dict()


def _hash(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    from smriti.portable import canonical_hash

    return {
        "user": engine.user,
        "canonical_hash": canonical_hash(engine),
        **engine.backend.counts(),
    }


def _reembed(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    from smriti.engine.reembed import reembed
    from smriti.progress import progress_bar

    with progress_bar(progress, "re-embedding") as bar:
        report = reembed(
            engine,
            batch_size=int(args.get("batch_size", 256)),
            force=bool(args.get("force")),
            progress=bar,
        )
    return report.to_dict()


def _graph(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    from smriti.graphview import DEFAULT_LIMIT
    from smriti.graphview.select import select_graph

    cluster = args.get("cluster")
    return select_graph(
        engine,
        cluster=None if cluster is None else int(cluster),
        around=str(args["around"]) if args.get("around") else None,
        hops=int(args.get("hops", 2)),
        limit=int(args.get("limit") or DEFAULT_LIMIT),
    )


def _clusters(engine: Engine, args: Mapping[str, Any], progress: ProgressArg) -> dict[str, Any]:
    from smriti.graphview.select import cluster_table

    return cluster_table(engine)


OPS: dict[str, Op] = {
    "store": _store,
    "recall": _recall,
    "forget": _forget,
    "purge": _purge,
    "get": _get,
    "correct": _correct,
    "history": _history,
    "update": _update,
    "related": _related,
    "duplicates": _duplicates,
    "merge": _merge,
    "consolidate": _consolidate,
    "sync": _sync,
    "stats": _stats,
    "export": _export,
    "import": _import,
    "hash": _hash,
    "reembed": _reembed,
    "graph": _graph,
    "clusters": _clusters,
}
