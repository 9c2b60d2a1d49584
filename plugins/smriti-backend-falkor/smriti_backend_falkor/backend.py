"""The FalkorDB storage backend.

Isolation (``FALKOR_ISOLATION``): ``tenant`` keeps every user in one graph
(``FALKOR_GRAPH``) and separates them by a ``user`` property on every node; ``graph``
gives each user a graph of their own, ``{user}_smriti``. Every statement filters on
``user`` in both modes, so a query can never reach another user's nodes.

Search: FalkorDB's HNSW (cosine) and full-text indexes are shared by every user of a
graph, so index hits are filtered by user (and memory type) *before* the top-k cut:
the backend over-fetches in proportion to how much of the index belongs to other
users, grows the fetch when the filter leaves too few hits, and falls back to an exact
in-database cosine scan of the user's own nodes (through the ``user`` range index).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from smriti import get_logger
from smriti.backend import (
    Association,
    BackendError,
    BackendOptions,
    CoOccurrence,
    Cue,
    DeferredWrites,
    Engram,
    EngramStats,
    EngramUpdate,
    Expand,
    Link,
    Listing,
    Neighbourhood,
    Seeds,
    Seek,
    StorageBackend,
    StoredMemory,
    batched,
    normalise_cue_name,
    utcnow,
)
from smriti_backend_falkor import queries as Q
from smriti_backend_falkor.connection import call, close_quietly, connect, graph_name_for
from smriti_backend_falkor.records import (
    association_from,
    association_row,
    cue_from_row,
    cue_row,
    engram_from_row,
    engram_props,
    stats_from_row,
    tag_props,
    ts,
    vector,
)
from smriti_backend_falkor.schema import IndexState
from smriti_backend_falkor.search import (
    SeekAnswer,
    SeekInput,
    SeekPlan,
    Way,
    neighbourhood_params,
    neighbourhood_statement,
    read_neighbourhood,
)
from smriti_backend_falkor.settings import (
    FALKOR_ADDR,
    FALKOR_GRAPH,
    FALKOR_ISOLATION,
    FALKOR_PASSWORD,
    SETTINGS,
)
from smriti_backend_falkor.spelling import refuse_other_spellings

log = get_logger(__name__)

SCHEMA_VERSION = str(Q.MIGRATIONS[-1][0])
_SCHEMA_KEY = "falkordb.schema_version"


class FalkorBackend(StorageBackend):
    """Smriti memories in a FalkorDB graph (server reached with the ``falkordb`` client)."""

    name: ClassVar[str] = "falkordb"
    aliases: ClassVar[tuple[str, ...]] = ("falkor",)
    description: ClassVar[str] = "FalkorDB server: tenant property or one graph per user"
    multi_tenant: ClassVar[bool] = True
    declared_settings = SETTINGS

    #: Rows per UNWIND statement for batched writes.
    write_batch: ClassVar[int] = 500
    #: Rows per page when streaming.
    read_batch: ClassVar[int] = 1000
    #: Smallest number of candidates asked from the HNSW and full-text indexes.
    min_index_fetch: ClassVar[int] = 64
    #: Above this many candidates the exact scan of the user's nodes is cheaper.
    max_index_fetch: ClassVar[int] = 8192
    #: Internal node ids per query of ``working_set_streams``.
    id_window: ClassVar[int] = 2000
    #: Cue top lists rebuilt per statement.
    top_batch: ClassVar[int] = 20
    #: Statements of rebuilt top lists a delete or an importance change runs; a larger
    #: one (deleting thousands of memories touches most hub cues) leaves the rest to
    #: ``ensure_indexes``, which consolidation and every 50th store call.
    top_statements: ClassVar[int] = 2

    def __init__(
        self,
        user: str,
        addr: str = "localhost:6379",
        password: str = "",
        graph: str = "smriti",
        isolation: str = "tenant",
    ) -> None:
        super().__init__(user)
        self.addr = addr
        self.isolation = isolation
        self.graph_name = graph_name_for(user, isolation, graph)
        self.multi_tenant = isolation == "tenant"  # type: ignore[misc]
        self._password = password
        self._client: Any = None
        self._graph: Any = None
        self._indexes: IndexState | None = None
        self._lock = threading.Lock()
        # Recall's access strengthening is a write the recall need not wait for; reads
        # of access fields and other writes drain it first.
        self._deferred = DeferredWrites("smriti-falkordb")

    @classmethod
    def from_options(cls, options: BackendOptions) -> FalkorBackend:
        """A backend for the user from the FALKOR_* settings."""
        return cls(
            options.user,
            addr=options.get(FALKOR_ADDR),
            password=options.get(FALKOR_PASSWORD),
            graph=options.get(FALKOR_GRAPH),
            isolation=options.get(FALKOR_ISOLATION),
        )

    def __repr__(self) -> str:
        return f"FalkorBackend(user={self.user!r}, addr={self.addr!r}, graph={self.graph_name!r})"

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> None:
        """Connect, create range and full-text indexes, and migrate this user's data."""
        with self._lock:
            if self._client is not None:
                return
            self._client = self._connect()
            self._graph = self._client.select_graph(self.graph_name)
        try:
            refuse_other_spellings(self, self._client)
            self._indexes = IndexState(self._run, self._run_schema)
            self._indexes.ensure_base()
            self._migrate()
        except BaseException:
            self.close()
            raise
        log.info("falkordb_opened", addr=self.addr, graph=self.graph_name, isolation=self.isolation)

    def _connect(self) -> Any:
        return connect(self.addr, self._password)

    def close(self) -> None:
        """Persist deferred access updates, release the connection pool; safe to call
        twice."""
        self._deferred.close()
        with self._lock:
            client, self._client, self._graph = self._client, None, None
        if client is not None:
            close_quietly(client)

    def _migrate(self) -> None:
        """Bring this user's data to ``SCHEMA_VERSION`` with the steps above its version
        (``queries.MIGRATIONS``; each is idempotent, so an open interrupted halfway runs
        them again safely), then rebuild the cue top lists an import left stale."""
        current = _version(self.get_meta(_SCHEMA_KEY))
        if current < int(SCHEMA_VERSION):
            for version, statements in Q.MIGRATIONS:
                if version > current:
                    for statement in statements:
                        self._run(statement)
            self.set_meta(_SCHEMA_KEY, SCHEMA_VERSION)
        self.refresh_cue_tops()

    def refresh_cue_tops(self, statements: int | None = None) -> int:
        """Rebuild the stale top lists of this user's cues (``queries.CUE_TOP``),
        ``top_batch`` cues per statement so that a hub cue's scan never blocks the graph
        for long, at most ``statements`` statements (None: all); returns how many were
        rebuilt. Reads of a stale cue scan its members meanwhile."""
        total = 0
        for _ in itertools.count() if statements is None else range(statements):
            rows = self._write(Q.REFRESH_TOPS, batch=self.top_batch)
            done = int(rows[0][0]) if rows else 0
            total += done
            if done < self.top_batch:
                break
        return total

    # -- query plumbing --------------------------------------------------------------
    def _run(self, query: str, params: dict[str, Any] | None = None, read: bool = False) -> list:
        """Run one parameterised statement scoped to this user; rows of scalars."""
        graph = self._graph
        if graph is None:
            raise BackendError(f"FalkorDB backend for {self.addr} is not open; call open() first")
        p = {"user": self.user, **(params or {})}
        if read:
            try:
                return call(self.addr, lambda: graph.ro_query(query, p)).result_set
            except BackendError as exc:
                if "empty key" not in str(exc):
                    raise
                # The graph does not exist (yet, or any more): a plain query creates it.
        return call(self.addr, lambda: graph.query(query, p)).result_set

    def _run_schema(self, query: str) -> Any:
        """Run a schema statement (no parameters); returns the raw query result."""
        graph = self._graph
        if graph is None:
            raise BackendError(f"FalkorDB backend for {self.addr} is not open; call open() first")
        return call(self.addr, lambda: graph.query(query))

    def _read(self, statement: str, /, **params: Any) -> list:
        return self._run(statement, params, read=True)

    def _write(self, statement: str, /, **params: Any) -> list:
        return self._run(statement, params)

    # -- metadata ----------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value, or None."""
        rows = self._read(Q.GET_META, key=key)
        return None if not rows else rows[0][0]

    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        self._write(Q.SET_META, key=key, value=value)

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Create the HNSW (cosine) and full-text indexes once the user has > min_engrams,
        and rebuild the cue top lists a bulk import left stale."""
        if self._indexes is None:
            raise BackendError(f"FalkorDB backend for {self.addr} is not open; call open() first")
        self.refresh_cue_tops()  # after a bulk import
        if self._indexes.has_all_vector(dims) or self.count_engrams() <= min_engrams:
            return []
        return self._indexes.ensure_search(dims)

    # -- writes ------------------------------------------------------------------------
    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        """Write the engram, its cues, edges and associations in one atomic statement,
        which also returns the cues as stored: one round trip."""
        now = utcnow()
        rows: dict[str, dict[str, Any]] = {}
        for cue in cues:  # converted before anything is written: a bad cue aborts cleanly
            row = cue_row(cue)
            rows.setdefault(row["key"], row)
        keys = list(rows)
        graph = self._graph
        if graph is None:
            raise BackendError(f"FalkorDB backend for {self.addr} is not open; call open() first")
        params = dict(
            user=self.user,
            id=engram.id,
            props=engram_props(engram, self.user),
            embedding=vector(engram.embedding),
            cues=list(rows.values()),
            assocs=[association_row(a, now) for a in associations if a.target_id != engram.id],
            now=ts(now),
        )
        result = call(self.addr, lambda: graph.query(Q.ADD_MEMORY, params))
        if result.result_set:
            rows = result.result_set[0][0]
        else:  # the engram was there already: a retry, or another memory's id
            self._check_existing(engram)
            rows = self._read(Q.CUES_OF_ENGRAM, id=engram.id)
        by_key = {_key(c): c for c in map(cue_from_row, rows)}
        return StoredMemory(engram=engram, cues=[by_key[k] for k in keys if k in by_key])

    def _check_existing(self, engram: Engram) -> None:
        """After a no-op add: fine if it is a retried write, an error for a reused id."""
        found = self.get_engrams([engram.id])
        if not found:
            raise BackendError(f"FalkorDB at {self.addr} did not store engram {engram.id!r}")
        if found[0].content != engram.content:
            raise BackendError(f"an engram with id {engram.id!r} already exists")

    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Partial updates, ``write_batch`` per statement; unknown ids are ignored. New
        tags replace the old ones in the full-text index in the same statement."""
        self._deferred.drain()
        self._update_engrams(updates)

    def _update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        for batch in batched(updates, self.write_batch):
            self._write(Q.UPDATE_ENGRAMS, rows=[_update_row(u) for u in batch])
        if any(u.importance is not None for u in updates):
            self.refresh_cue_tops(self.top_statements)

    def strengthen_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Recall's access updates, written on a background thread (``DeferredWrites``):
        this backend's reads of access fields wait for them, ``close`` persists them."""
        if updates:
            self._deferred.submit(lambda: self._update_engrams(list(updates)))

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete this user's engrams with these ids and their edges; count them."""
        self._deferred.drain()
        deleted = 0
        for batch in batched(dict.fromkeys(ids), self.write_batch):
            rows = self._write(Q.DELETE_ENGRAMS, ids=batch)
            deleted += int(rows[0][0]) if rows else 0
        if deleted:
            self.refresh_cue_tops(self.top_statements)
        return deleted

    def delete_orphan_cues(self) -> int:
        """Delete cues that encode no engram (with their CoOccurs edges)."""
        rows = self._write(Q.DELETE_ORPHAN_CUES)
        return int(rows[0][0]) if rows else 0

    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Bulk-load records as given (ids kept, existing ids replaced), batched. The top
        lists of the cues it touches are rebuilt by the next ``ensure_indexes`` or
        ``open`` (once, not after every batch); reads scan those cues until then."""
        self._deferred.drain()
        now = utcnow()
        unique = list({e.id: e for e in engrams}.values())  # the engram count relies on it
        for batch in batched(unique, self.write_batch):
            rows = [
                {"props": engram_props(e, self.user), "embedding": vector(e.embedding)}
                for e in batch
            ]
            self._write(Q.IMPORT_ENGRAMS, rows=rows)
            # A replaced engram's importance may have changed (refreshed by
            # ensure_indexes or the next open; reads scan those cues meanwhile).
            self._write(Q.STALE_TOPS_OF, ids=[e.id for e in batch])
        for batch in batched(cues, self.write_batch):
            rows = [cue_row(c) for c in batch]
            self._write(Q.IMPORT_CUES, rows=rows)
            self._write(Q.IMPORT_CUES_MERGE, rows=rows)
        unique_links = list({(lk.engram_id, lk.cue_id): lk for lk in links}.values())
        for batch in batched(unique_links, self.write_batch):
            rows = [
                {"engram_id": lk.engram_id, "cue_id": lk.cue_id, "strength": float(lk.strength)}
                for lk in batch
            ]
            self._write(Q.IMPORT_LINKS, rows=rows, now=ts(now))
        for batch in batched(associations, self.write_batch):
            self._write(Q.IMPORT_ASSOCIATIONS, rows=[association_row(a, now) for a in batch])
        for batch in batched(cooccurrences, self.write_batch):
            rows = [
                {"source_id": c.source_id, "target_id": c.target_id, "strength": float(c.strength)}
                for c in batch
            ]
            self._write(Q.IMPORT_COOCCURRENCES, rows=rows)

    # -- reads -------------------------------------------------------------------------
    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """This user's engrams with these ids (without embeddings unless ``embeddings``:
        parsing 384 floats each was most of a recall's pool); unknown ids skipped."""
        self._deferred.drain()
        statement = Q.GET_ENGRAMS if embeddings else Q.GET_ENGRAMS_BARE
        out: list[Engram] = []
        for batch in batched(dict.fromkeys(ids), self.read_batch):
            out.extend(engram_from_row(r) for r in self._read(statement, ids=batch))
        return out

    def list_page(self, listing: Listing) -> list[Engram]:
        """One statement (``queries.LIST_PAGE``): every filter and the page key are
        parameters of the query, applied before its LIMIT."""
        if listing.limit <= 0:
            return []
        self._deferred.drain()
        rows = self._read(Q.LIST_PAGE, **_listing_params(listing))
        return [engram_from_row(r) for r in rows]

    def count_engrams(self) -> int:
        """How many engrams this user has."""
        return int(self._read(Q.COUNT_ENGRAMS, memory_type=None)[0][0])

    def counts(self) -> dict[str, int]:
        """Counts of this user's engrams, cues and edges."""
        return {
            "engrams": self.count_engrams(),
            "cues": int(self._read(Q.COUNT_CUES)[0][0]),
            "links": int(self._read(Q.COUNT_LINKS)[0][0]),
            "associations": int(self._read(Q.COUNT_ASSOCIATIONS)[0][0]),
            "cooccurrences": int(self._read(Q.COUNT_COOCCURRENCES)[0][0]),
        }

    def engram_stats(self) -> Iterator[EngramStats]:
        """Every engram's consolidation fields, paged by id."""
        self._deferred.drain()
        for row in self._pages_by_id(Q.PAGE_ENGRAM_STATS, self.read_batch):
            yield stats_from_row(row)

    def _pages_by_id(self, query: str, size: int) -> Iterator[Sequence[Any]]:
        after = ""
        while True:
            rows = self._read(query, after=after, limit=size)
            yield from rows
            if len(rows) < size:
                return
            after = rows[-1][0]

    def _pages(self, query: str) -> Iterator[Sequence[Any]]:
        """Edge rows ordered by (source id, target id), a page after the last pair seen:
        edges written or deleted meanwhile shift no page (consolidation clusters while
        it deletes), which SKIP could."""
        after_a = after_b = ""
        while True:
            rows = self._read(query, after_a=after_a, after_b=after_b, limit=self.read_batch)
            yield from rows
            if len(rows) < self.read_batch:
                return
            after_a, after_b = rows[-1][0], rows[-1][1]

    # -- recall reads -------------------------------------------------------------------
    def seek(self, query: Seek) -> Seeds:
        """Every channel of a recall in one statement (``search``), the engram count too.

        A second statement runs only when the shared index's user/type filter may have
        left out hits of a channel, or when nothing matched the text and the full-text
        index turns out to be lost (a server that restarted empty).
        """
        ask = SeekInput.of(query)
        seeds = self._seek(ask, total=True)
        if ask.text and not seeds.text and self._restore_fulltext():
            self._run_seek(SeekPlan(text="all"), ask).into(seeds)
        return seeds

    def vector_search_above(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[str, float]]:
        """Top-``k`` engrams with cosine similarity of at least ``min_score``: the vector
        channel of ``seek`` alone (no engram count)."""
        ask = SeekInput.of(Seek(k=k, vector=embedding, vector_floor=min_score))
        return self._seek(ask, total=False).vector if ask.vector else []

    def _seek(self, ask: SeekInput, total: bool) -> Seeds:
        seeds = Seeds()
        plan: SeekPlan | None = self._seek_plan(ask, total)
        while plan is not None and not plan.empty:
            answer = self._run_seek(plan, ask)
            answer.into(seeds)
            plan = self._seek_again(answer, ask)
        return seeds

    def _seek_plan(self, ask: SeekInput, total: bool) -> SeekPlan:
        assert self._indexes is not None, "open() first"
        dims = ask.dims
        ready = {label: self._indexes.vector_ready(label, dims) for label in ("Engram", "Cue")}
        return SeekPlan(
            vector=None if ask.vector is None else "index" if ready["Engram"] else "exact",
            vector_fetch=max(self.min_index_fetch, 2 * ask.k),
            text=None if ask.text is None else "top",
            text_fetch=max(self.min_index_fetch, 2 * ask.k),
            cue_names=bool(ask.cue_names),
            cue_vectors=None if not ask.cue_vectors else "index" if ready["Cue"] else "exact",
            cue_fetch=max(self.min_index_fetch, 2 * ask.cue_neighbours),
            total=total,
        )

    def _seek_again(self, answer: SeekAnswer, ask: SeekInput) -> SeekPlan | None:
        """The channels to ask again, bigger or exact, or None when the answer is complete."""
        vector: Way | None = None
        fetch = 0
        if answer.vector_short(ask):
            fetch = answer.next_vector_fetch(ask)
            vector = "index" if fetch <= self.max_index_fetch else "exact"
        cues = answer.cues_short()
        text = answer.text_short(ask)
        if vector is None and not cues and not text:
            return None
        return SeekPlan(
            vector=vector,
            vector_fetch=fetch,
            text="all" if text else None,
            cue_names=cues and bool(ask.cue_names),
            cue_vectors="exact" if cues else None,
        )

    def _run_seek(self, plan: SeekPlan, ask: SeekInput) -> SeekAnswer:
        statement, columns = plan.statement()
        try:
            [row] = self._run(statement, plan.params(ask), read=True)
        except BackendError as exc:
            if not plan.uses_index:
                raise
            # An index the cached state lists is gone (e.g. the server restarted empty).
            log.warning("falkordb_vector_index_failed", error=str(exc))
            assert self._indexes is not None
            self._indexes.refresh()
            plan = self._seek_plan(ask, plan.total)
            statement, columns = plan.statement()
            [row] = self._run(statement, plan.params(ask), read=True)
        return SeekAnswer(plan, dict(zip(columns, row, strict=True)), ask.cue_fanout)

    def _restore_fulltext(self) -> bool:
        """After an empty answer: recreate indexes lost to a server that restarted empty.

        FalkorDB answers a full-text query on a missing index with no rows, not an
        error, so an empty result is the only hint. Costs one ``db.indexes()`` call.
        """
        assert self._indexes is not None, "open() first"
        self._indexes.refresh()
        return bool(self._indexes.ensure_base())

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """One hop around ``query.ids`` in one statement (``search``)."""
        if not query.ids:
            return Neighbourhood()
        rows = self._run(
            neighbourhood_statement(query.edges > 0), neighbourhood_params(query), read=True
        )
        return read_neighbourhood(query, rows[0])

    # -- cues ---------------------------------------------------------------------------
    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """Stored cues whose normalised name is one of ``names``."""
        keys = list(dict.fromkeys(normalise_cue_name(n) for n in names))
        return [cue_from_row(r) for r in self._read(Q.GET_CUES, keys=keys)] if keys else []

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """Stored cues with these ids (one lookup, not the base class's scan)."""
        wanted = list(dict.fromkeys(ids))
        return [cue_from_row(r) for r in self._read(Q.GET_CUES_BY_ID, ids=wanted)] if wanted else []

    # -- streams -------------------------------------------------------------------------
    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, ordered by id, ``batch_size`` per query."""
        self._deferred.drain()
        for row in self._pages_by_id(Q.PAGE_ENGRAMS, max(1, batch_size)):
            yield engram_from_row(row)

    def iter_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding, ordered by id."""
        for row in self._pages_by_id(Q.PAGE_CUES, self.read_batch):
            yield cue_from_row(row)

    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge of this user."""
        for e, c, s in self._pages(Q.PAGE_LINKS):
            yield Link(e, c, float(s))

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge of this user."""
        for src, tgt, strength, rel, created in self._pages(Q.PAGE_ASSOCIATIONS):
            yield association_from(src, tgt, strength, rel, created)

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge of this user."""
        for a, b, s in self._pages(Q.PAGE_COOCCURRENCES):
            yield CoOccurrence(a, b, float(s))

    def working_set_streams(
        self,
    ) -> tuple[Iterable[Cue], Iterable[Engram], Iterable[Link], Iterable[Association]]:
        """The user's cues, engrams, links and associations in internal-id windows (any
        order, as a working set load allows): each window is an id seek, where a page of
        the id-ordered streams sorts every remaining node of the user."""
        self._deferred.drain()
        return (
            (cue_from_row(r) for r in self._windows(Q.WINDOW_CUES)),
            (engram_from_row(r) for r in self._windows(Q.WINDOW_ENGRAMS)),
            (Link(e, c, float(s)) for e, c, s in self._windows(Q.WINDOW_LINKS)),
            (association_from(*r) for r in self._windows(Q.WINDOW_ASSOCIATIONS)),
        )

    def _windows(self, statement: str) -> Iterator[Sequence[Any]]:
        """Rows of ``statement`` over every window of ``id_window`` internal node ids, up
        to the largest id when the stream starts."""
        top = self._read(Q.MAX_NODE_ID)[0][0]
        for lo in range(0, -1 if top is None else int(top) + 1, self.id_window):
            yield from self._read(statement, lo=lo, hi=lo + self.id_window)

    # -- maintenance -----------------------------------------------------------------------
    def wait_for_indexes(self, timeout: float = 60.0) -> None:
        """Block until every index of the graph is operational (for tests, benchmarks)."""
        assert self._indexes is not None, "open() first"
        if not self._indexes.wait_operational(timeout):
            raise BackendError(f"FalkorDB indexes at {self.addr} still building after {timeout}s")


def _key(cue: Cue) -> str:
    return normalise_cue_name(cue.name)


def _version(value: str | None) -> int:
    """A stored schema version; 0 for none (a store from before versions were kept)."""
    return int(value) if value and value.isdigit() else 0


def _update_row(u: EngramUpdate) -> dict[str, Any]:
    """One row of ``queries.UPDATE_ENGRAMS``: None leaves a field as it is."""
    tags = None if u.tags is None else tag_props(u.tags)
    return {
        "id": u.id,
        "access_count": u.access_count,
        "last_accessed_at": ts(u.last_accessed_at),
        "decay_factor": None if u.decay_factor is None else float(u.decay_factor),
        "cluster_id": u.cluster_id,
        "importance": None if u.importance is None else float(u.importance),
        "tags": None if tags is None else tags["tags"],
        "tags_text": None if tags is None else tags["tags_text"],
        "superseded_by": u.superseded_by,
        "superseded_at": ts(u.superseded_at),
    }


def _listing_params(listing: Listing) -> dict[str, Any]:
    """The parameters of ``queries.LIST_PAGE``: timestamps as stored, so they compare
    exactly (``records.ts``)."""
    after = listing.after
    return {
        "limit": int(listing.limit),
        "memory_type": listing.memory_type,
        "tags": [str(t) for t in listing.tags],
        "all_tags": bool(listing.all_tags),
        "since": ts(listing.since),
        "until": ts(listing.until),
        "include_superseded": bool(listing.include_superseded),
        "cluster_id": None if listing.cluster_id is None else int(listing.cluster_id),
        # A prefix ends in ':' (smriti.model.origin_matches).
        "origin": listing.origin,
        "origin_prefix": bool(listing.origin and listing.origin.endswith(":")),
        "after_seen": None if after is None else ts(after[0]),
        "after_made": None if after is None else ts(after[1]),
        "after_id": None if after is None else str(after[2]),
    }
