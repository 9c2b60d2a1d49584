"""The Neo4j storage backend.

Two isolation modes (``NEO4J_ISOLATION``):

``tenant`` (default)
    All users share one database (``NEO4J_DATABASE``). Every node carries a ``user``
    property and every statement filters on it, index queries included: vector and
    full-text hits are filtered by user *before* the top-k cut.
``database``
    One database per user, named by :func:`~smriti_backend_neo4j.naming.database_name_for`
    and created on first use. Needs Neo4j Enterprise Edition (Community has a single
    user database); nodes still carry ``user``, so the same statements run in both modes.

The driver is imported when a backend is opened, not when the plugin is loaded.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import structlog

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
    joined,
    normalise_cue_name,
    utcnow,
)
from smriti_backend_neo4j import cypher as q
from smriti_backend_neo4j.listing import list_statement
from smriti_backend_neo4j.naming import database_name_for
from smriti_backend_neo4j.reads import (
    SHARE_UNKNOWN,
    neighbourhood_from,
    neighbourhood_statement,
    seeds_from,
    seek_statement,
)
from smriti_backend_neo4j.records import (
    association_from,
    association_row,
    cue_from,
    cue_props,
    distinct_cues,
    engram_from,
    engram_props,
    epoch_pair,
    stats_from,
    update_row,
    whole,
)
from smriti_backend_neo4j.settings import (
    NEO4J_DATABASE,
    NEO4J_ISOLATION,
    NEO4J_PASSWORD,
    NEO4J_URI,
    NEO4J_USERNAME,
    SETTINGS,
)
from smriti_backend_neo4j.spelling import refuse_other_spellings

if TYPE_CHECKING:
    from neo4j import Driver, Session, Transaction


log = structlog.get_logger("smriti.neo4j")

SCHEMA_VERSION = len(q.MIGRATIONS)
WRITE_BATCH = 1000
# Bulk import: edge rows are small, so a transaction carries more of them (each commit
# costs a few milliseconds); engram rows carry two copies of an embedding each.
IMPORT_EDGE_BATCH = 5000
INDEX_WAIT_SECONDS = 600
# Transient errors (deadlocks, leader switches, lost connections) are retried after
# RETRY_FIRST seconds, doubling up to RETRY_CAP, each delay jittered by up to half,
# until ``retry_seconds`` have passed since the call's first failure.
RETRY_FIRST, RETRY_CAP = 0.02, 1.0
TOTAL_SECONDS = 5.0
#: Seconds the server gives one read statement before it ends it. Every read here is
#: bounded (pages, seeks, one hop) and takes milliseconds to a second; one that does not
#: answer is stuck, and a caller (an MCP client, a store holding its duplicate-check
#: lock) must get an answer or an error rather than wait for ever.
READ_TIMEOUT = 60.0
#: The smallest share assumed (a user with 1/16 of a shared index's rows, or fewer,
#: fetches 16 times what it needs in the first stage; the second stage does the rest).
MIN_SHARE = 1 / 16
#: Threads running seeks' vector statements (beside the calling threads).
SEEK_THREADS = 4
URI_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


class Neo4jBackend(StorageBackend):
    """Smriti storage on a Neo4j 5.x server over Bolt (Community or Enterprise)."""

    name: ClassVar[str] = "neo4j"
    description: ClassVar[str] = "Neo4j server (tenant property or database per user)"
    multi_tenant: ClassVar[bool] = True
    declared_settings = SETTINGS

    def __init__(
        self,
        user: str,
        *,
        uri: str,
        username: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        isolation: str = "tenant",
        connect_timeout: float = 10.0,
        retry_seconds: float = 15.0,
        read_timeout: float = READ_TIMEOUT,
        vector_indexes: bool = True,
    ) -> None:
        """``vector_indexes=False`` never creates the native vector indexes (existing
        ones are still used): behind a working set they would only serve the reads
        before it is loaded, and every store would pay for updating them.
        ``read_timeout`` bounds each read statement on the server (``_run``)."""
        super().__init__(user)
        if isolation not in ("tenant", "database"):
            raise BackendError(f"NEO4J_ISOLATION={isolation!r} is invalid (tenant, database)")
        self.uri = uri
        self.username = username
        self._password = password
        self.isolation = isolation
        self.multi_tenant = isolation == "tenant"  # type: ignore[misc]
        self.database = database if isolation == "tenant" else self.database_for(user)
        self.connect_timeout = connect_timeout
        self.retry_seconds = retry_seconds
        self.read_timeout = read_timeout
        self.vector_indexes = vector_indexes
        self._driver: Driver | None = None
        self._vector_indexes: dict[str, _VectorIndex] = {}  # usable ones, by label
        self._lock = threading.Lock()
        #: Transient errors retried so far, by Neo4j error code (for monitoring).
        self.retries: Counter[str] = Counter()
        # The user's engram count for ``seek``: counting through the ``user`` index reads
        # every entry (about 1.4 ms per thousand engrams), so it is counted again only
        # when older than TOTAL_SECONDS or unknown, and kept up to date by this backend's
        # own writes in between (other processes' writes show after at most that long).
        self._total: int | None = None
        self._total_at = 0.0
        self._writes = 0  # bumped by every write that changes the count
        # Recall's access strengthening is a write transaction the recall need not wait
        # for; reads of access fields and other writes drain it first.
        self._deferred = DeferredWrites("smriti-neo4j")
        # Whether this backend changed engram text since the full-text index (eventually
        # consistent, see cypher.SCHEMA) was last awaited: its next text read awaits it.
        self._text_changed = False
        # The user's part of the shared vector index's hits, which sizes the next
        # vector search's fetch (``reads.VECTOR_OVERFETCH``).
        self._share = SHARE_UNKNOWN
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def from_options(cls, options: BackendOptions) -> Neo4jBackend:
        """Build from ``NEO4J_URI``, ``NEO4J_USERNAME``, ``NEO4J_PASSWORD``,
        ``NEO4J_DATABASE`` and ``NEO4J_ISOLATION``; no vector indexes are created when
        the engine puts a working set in front (``SMRITI_WORKING_SET=on``)."""
        backend = cls(
            options.user,
            uri=options.get(NEO4J_URI),
            username=options.get(NEO4J_USERNAME),
            password=options.get(NEO4J_PASSWORD),
            database=options.get(NEO4J_DATABASE),
            isolation=options.get(NEO4J_ISOLATION),
        )
        backend.vector_indexes = not options.working_set
        return backend

    @staticmethod
    def database_for(user: str) -> str:
        """The per-user database name in ``database`` isolation mode."""
        return database_name_for(user)

    def __repr__(self) -> str:  # never shows the password
        return f"Neo4jBackend(user={self.user!r}, uri={self.uri!r}, database={self.database!r})"

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> None:
        """Connect (bounded by ``connect_timeout``), pick the database, migrate."""
        with self._lock:
            if self._driver is not None:
                return
            self._driver = self._connect()
        try:
            if self.isolation == "database":
                self._ensure_database()
            else:  # a database of one's own was named from the exact user name
                refuse_other_spellings(self)
            self._create_schema()
            self._migrate()
            self._refresh_vector_indexes()
        except BaseException:
            self.close()
            raise
        log.info("neo4j backend open", uri=self.uri, database=self.database, user=self.user,
                 isolation=self.isolation)  # fmt: skip

    def _connect(self) -> Driver:
        import neo4j
        from neo4j.exceptions import AuthError, DriverError, Neo4jError

        scheme = self.uri.split("://", 1)[0].lower()
        if scheme not in URI_SCHEMES:
            raise BackendError(
                f"NEO4J_URI={self.uri!r} is not a Bolt URI: use one of "
                f"{', '.join(s + '://' for s in URI_SCHEMES)}"
            )
        auth = (self.username, self._password) if self._password else None
        try:
            driver = neo4j.GraphDatabase.driver(
                self.uri,
                auth=auth,
                connection_timeout=self.connect_timeout,
                connection_acquisition_timeout=self.connect_timeout * 2,
                max_transaction_retry_time=self.retry_seconds,
                user_agent="smriti-backend-neo4j",
                notifications_min_severity="OFF",  # "unknown property" on a fresh database
            )
        except (ValueError, DriverError) as exc:
            raise BackendError(f"NEO4J_URI={self.uri!r} is not a usable Neo4j URI: {exc}") from None
        try:
            driver.verify_connectivity()
        except AuthError:
            driver.close()
            raise BackendError(
                f"Neo4j at {self.uri} rejected the credentials of user {self.username!r}: "
                "check NEO4J_USERNAME and NEO4J_PASSWORD"
            ) from None
        except (DriverError, Neo4jError, OSError) as exc:
            driver.close()
            raise BackendError(
                f"cannot connect to Neo4j at {self.uri} (timeout {self.connect_timeout:g}s): "
                f"{_first_line(exc)}. Is the server running, and is NEO4J_URI right?"
            ) from None
        return driver

    def _ensure_database(self) -> None:
        from neo4j.exceptions import ClientError

        found = self._run(q.DATABASE_EXISTS, database="system", name=self.database)
        if found:
            return
        try:
            self._run(q.CREATE_DATABASE, database="system", name=self.database)
        except BackendError as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and "Unsupported" in (cause.code or ""):
                raise BackendError(
                    f"NEO4J_ISOLATION=database needs Neo4j Enterprise Edition: the server at "
                    f"{self.uri} (Community Edition) cannot CREATE DATABASE "
                    f"{self.database!r} for user {self.user!r}. Use NEO4J_ISOLATION=tenant, "
                    "or an Enterprise server."
                ) from None
            raise
        log.info("neo4j database created", database=self.database, user=self.user)

    def _create_schema(self) -> None:
        from neo4j.exceptions import ClientError

        for statement in q.SCHEMA:
            try:
                self._run(statement)
            except BackendError as exc:
                # Another process created the same rule between IF NOT EXISTS and commit.
                cause = exc.__cause__
                if not (isinstance(cause, ClientError) and "Equivalent" in (cause.code or "")):
                    raise
        self._run(q.AWAIT_INDEXES, seconds=INDEX_WAIT_SECONDS)

    def _migrate(self) -> None:
        version = int(self.get_meta("neo4j.schema_version") or 0)
        for step in range(version, SCHEMA_VERSION):
            self._autocommit(q.MIGRATIONS[step], {"user": self.user})
            log.info("neo4j schema migrated", user=self.user, version=step + 1)
        if version != SCHEMA_VERSION:
            self.set_meta("neo4j.schema_version", str(SCHEMA_VERSION))

    def close(self) -> None:
        """Persist deferred access updates, close the driver; safe to call twice."""
        self._deferred.close()
        with self._lock:
            driver, self._driver = self._driver, None
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if driver is not None:
            driver.close()

    # -- plumbing ------------------------------------------------------------------------
    @property
    def driver(self) -> Driver:
        """The open driver (BackendError when the backend is not open)."""
        if self._driver is None:
            raise BackendError("the Neo4j backend is not open (call open() first)")
        return self._driver

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn driver errors into BackendError naming the server and database."""
        from neo4j.exceptions import DriverError, Neo4jError

        try:
            yield
        except (Neo4jError, DriverError) as exc:
            raise BackendError(
                f"Neo4j at {self.uri} (database {self.database!r}) failed: {_first_line(exc)}"
            ) from exc

    def _run(self, statement: str, *, database: str | None = None, read: bool = False,
             **params: Any) -> list[Any]:  # fmt: skip
        """Run one statement in a managed (retried) transaction; return its records.
        A read is bounded by ``read_timeout`` and run again after a timeout or the
        server's "unexpected error" (``_unexpected``): reads change nothing."""
        import neo4j

        routing = neo4j.RoutingControl.READ if read else neo4j.RoutingControl.WRITE
        query = neo4j.Query(statement, timeout=self.read_timeout) if read else statement
        failed_at: float | None = None  # the retry clock starts at the first failure
        for tries in itertools.count():
            try:
                with self._errors():
                    result = self.driver.execute_query(
                        query, params, database_=database or self.database, routing_=routing
                    )
                return list(result.records)
            except BackendError as exc:
                failed_at = time.monotonic() if failed_at is None else failed_at
                again = read and (_unexpected(exc.__cause__) or _timed_out(exc.__cause__))
                if not again or self._retries_over(failed_at):
                    if read and _timed_out(exc.__cause__):
                        raise BackendError(
                            f"Neo4j at {self.uri} (database {self.database!r}) did not answer "
                            f"a read within {self.read_timeout:g}s ({tries + 1} tries)"
                        ) from exc.__cause__
                    raise
                self._note_retry(exc.__cause__, tries)
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, statement: str, **params: Any) -> list[Any]:
        return self._run(statement, read=True, user=self.user, **params)

    def _write(self, statement: str, **params: Any) -> list[Any]:
        """Run one write statement in its own transaction (retried); return its records."""
        params["user"] = self.user
        return self._transaction(lambda tx: list(tx.run(statement, params)))

    def _autocommit(self, statement: str, params: dict[str, Any]) -> list[Any]:
        """Run one write statement as an auto-commit transaction (retried): one round
        trip, and the records are read only after the server committed it."""

        def attempt(session: Session) -> list[Any]:
            result = session.run(statement, params)
            records = list(result)
            result.consume()
            return records

        return self._retrying(attempt)

    def _transaction(self, work: Callable[[Transaction], Any]) -> Any:
        """Run ``work`` in one write transaction and commit, retried (``_retrying``)."""

        def attempt(session: Session) -> Any:
            with session.begin_transaction() as tx:
                result = work(tx)
                tx.commit()
                return result

        return self._retrying(attempt)

    def _retrying(self, attempt: Callable[[Session], Any]) -> Any:
        """``attempt(session)`` on a write session; on a transient error (a deadlock, a
        leader switch, a lost connection) again after a short jittered delay, until
        ``retry_seconds`` have passed since the first failure (``_retries_over``)."""
        from neo4j.exceptions import DriverError, Neo4jError

        bookmarks = self.driver.execute_query_bookmark_manager
        failed_at: float | None = None  # the retry clock starts at the first failure
        for tries in itertools.count():
            try:
                with self._errors(), self.driver.session(
                    database=self.database, bookmark_manager=bookmarks
                ) as session:  # fmt: skip
                    return attempt(session)
            except BackendError as exc:
                cause = exc.__cause__
                retryable = isinstance(cause, (Neo4jError, DriverError)) and (
                    cause.is_retryable() or _unexpected(cause)
                )
                failed_at = time.monotonic() if failed_at is None else failed_at
                if not retryable or self._retries_over(failed_at):
                    raise
                self._note_retry(cause, tries)
        raise AssertionError("unreachable")  # pragma: no cover

    def _retries_over(self, failed_at: float) -> bool:
        """Whether ``retry_seconds`` have passed since the first failure of a call.

        The clock starts at the first failure, not at the call, as in the driver's own
        managed transactions: an attempt may wait for locks for many seconds before the
        server ends it as a deadlock victim (twenty sessions storing memories over the
        same few cues queue for those cues' locks, longer on a loaded machine), and a
        clock started at the call let such a wait use up the time, so a store that had
        failed once or twice went to the caller. A deadlock or a 50N42 rolls the attempt
        back, so running it again is always safe."""
        return time.monotonic() - failed_at >= self.retry_seconds

    def _note_retry(self, cause: BaseException, attempt: int) -> None:
        """Count and log a transient error, then wait before the next attempt."""
        code = getattr(cause, "code", None) or type(cause).__name__
        with self._lock:
            self.retries[code] += 1
        delay = min(RETRY_CAP, RETRY_FIRST * 2**attempt)
        delay -= random.uniform(0, delay / 2)
        # A read the server had to end is worth a warning: it points at a stuck server.
        emit = log.warning if _timed_out(cause) else log.info
        emit("neo4j transaction retried", code=code, attempt=attempt + 1,
             delay=round(delay, 3), error=_first_line(cause))  # fmt: skip
        time.sleep(delay)

    # -- metadata --------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A per-user metadata value, or None."""
        records = self._read(q.GET_META, key=key)
        return records[0]["value"] if records else None

    def set_meta(self, key: str, value: str) -> None:
        """Store a per-user metadata value."""
        self._write(q.SET_META, key=key, value=value)

    def ensure_indexes(self, dims: int, min_engrams: int) -> list[str]:
        """Create the engram and cue vector indexes (cosine) once the user has more than
        ``min_engrams`` engrams. The full-text index exists from ``open``."""
        dims = int(dims)
        if not self.vector_indexes or dims <= 0 or self.count_engrams() <= min_engrams:
            return []
        existing = self._refresh_vector_indexes()
        created = []
        for name, statement in q.CREATE_VECTOR_INDEX.items():
            label = q.VECTOR_INDEX_LABELS[name]
            if label in existing:
                self._check_index(existing[label], dims)
                continue
            self._run(statement, dims=dims)
            self._run(q.AWAIT_INDEX, name=name, seconds=INDEX_WAIT_SECONDS)
            created.append(name)
            log.info("neo4j vector index created", index=name, dims=dims)
        if created:
            self._refresh_vector_indexes()
        return created

    def _check_index(self, index: _VectorIndex, dims: int) -> None:
        if index.dims != dims or not index.cosine:
            log.warning(
                "an existing Neo4j vector index does not fit; using exact search",
                index=index.name, index_dims=index.dims, dims=dims, cosine=index.cosine,
            )  # fmt: skip

    def _refresh_vector_indexes(self) -> dict[str, _VectorIndex]:
        """The vector indexes on ``:Engram(embedding)`` and ``:Cue(embedding)`` by label;
        remember the usable (ONLINE, cosine) ones."""
        found: dict[str, _VectorIndex] = {}
        for record in self._run(q.VECTOR_INDEXES, read=True):
            config = (record["options"] or {}).get("indexConfig", {})
            found[record["label"]] = _VectorIndex(
                name=record["name"],
                dims=int(config.get("vector.dimensions") or 0),
                cosine=str(config.get("vector.similarity_function", "")).upper() == "COSINE",
                online=record["state"] == "ONLINE",
            )
        self._vector_indexes = {k: v for k, v in found.items() if v.online and v.cosine}
        return found

    # -- writes ----------------------------------------------------------------------------
    def add_memory(
        self, engram: Engram, cues: Sequence[Cue], associations: Sequence[Association]
    ) -> StoredMemory:
        """Store the engram, its cues, EncodedBy, CoOccurs and AssociatedWith edges with
        one statement in one transaction (``q.STORE_MEMORY``: one round trip), locking
        the cues (by key) and then the associated engrams (by id) so that concurrent
        stores, recalls and forgets never deadlock."""
        from neo4j.exceptions import ConstraintError

        cue_rows = sorted(distinct_cues(cues, self.user), key=lambda c: c["key"])
        assoc_rows = sorted((association_row(a) for a in associations),
                            key=lambda a: (a["target"], a["relation_type"]))  # fmt: skip
        params = {
            "user": self.user,
            "props": engram_props(engram, self.user),
            "cues": cue_rows,
            "now": epoch_pair(utcnow()),
            "targets": sorted({a["target"] for a in assoc_rows} - {engram.id}),
            "associations": assoc_rows,
        }
        try:
            records = self._autocommit(q.STORE_MEMORY, params)
            self._text_changed = True
            self._counted(+1)
        except BackendError as exc:
            if not isinstance(exc.__cause__, ConstraintError):
                raise
            return self._stored_already(engram, exc)
        by_key = {key: cue for key, cue in records[0]["cues"]}
        order = [normalise_cue_name(c.name) for c in cues]
        return StoredMemory(engram=engram, cues=[cue_from(by_key[k]) for k in dict.fromkeys(order)])

    def _stored_already(self, engram: Engram, error: BackendError) -> StoredMemory:
        """The engram id exists: a retry of the same memory returns it unchanged; another
        memory under that id is an error."""
        found = self._read(q.ENGRAM_CONTENT, id=engram.id)
        if not found:
            raise error
        if found[0]["content"] != engram.content:
            raise BackendError(
                f"an engram with id {engram.id!r} already exists with other content"
            ) from None
        cues = [cue_from(r["cue"]) for r in self._read(q.STORED_CUES, id=engram.id)]
        return StoredMemory(engram=engram, cues=cues)

    def update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Apply partial updates, ``WRITE_BATCH`` per transaction, in id order (the lock
        order); unknown ids are ignored."""
        self._deferred.drain()
        self._update_engrams(updates)

    def _update_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        rows = sorted((update_row(u) for u in updates), key=lambda r: r["id"])
        for chunk in batched(rows, WRITE_BATCH):
            self._write(q.UPDATE_ENGRAMS, rows=chunk)
        if any(u.tags is not None for u in updates):
            self._text_changed = True

    def strengthen_engrams(self, updates: Sequence[EngramUpdate]) -> None:
        """Recall's access updates, written on a background thread (``DeferredWrites``):
        this backend's reads of access fields wait for them, ``close`` persists them."""
        if updates:
            self._deferred.submit(lambda: self._update_engrams(list(updates)))

    def delete_engrams(self, ids: Sequence[str]) -> int:
        """Delete these engrams with every edge touching them; return how many existed.
        Their cues and neighbouring engrams are locked first, in the lock order."""
        self._deferred.drain()
        deleted = 0
        for chunk in batched(sorted(set(ids)), WRITE_BATCH):

            def work(tx: Transaction, chunk: list[str] = chunk) -> int:
                tx.run(q.LOCK_CUES_OF, user=self.user, ids=chunk).consume()
                tx.run(q.LOCK_ENGRAMS_AROUND, user=self.user, ids=chunk).consume()
                return int(tx.run(q.DELETE_ENGRAMS, user=self.user, ids=chunk).single()[0])

            gone = self._transaction(work)
            self._text_changed = True
            self._counted(-gone)
            deleted += gone
        return deleted

    def delete_orphan_cues(self) -> int:
        """Delete cues that no engram is EncodedBy, in batches; return how many."""
        total = 0
        while True:
            ids = [r["id"] for r in self._read(q.FIND_ORPHAN_CUES, batch=WRITE_BATCH)]
            if not ids:
                return total

            def work(tx: Transaction, ids: list[str] = ids) -> int:
                tx.run(q.LOCK_CUES_AROUND, user=self.user, ids=ids).consume()
                return int(tx.run(q.DELETE_ORPHANS, user=self.user, ids=ids).single()[0])

            total += self._transaction(work)
            if len(ids) < WRITE_BATCH:
                return total

    def import_records(
        self,
        engrams: Sequence[Engram],
        cues: Sequence[Cue],
        links: Sequence[Link],
        associations: Sequence[Association],
        cooccurrences: Sequence[CoOccurrence],
    ) -> None:
        """Bulk-load records with their ids, one UNWIND statement per transaction:
        ``WRITE_BATCH`` engrams or cues, ``IMPORT_EDGE_BATCH`` edges."""
        self._deferred.drain()
        steps: list[tuple[str, int, list[dict[str, Any]]]] = [
            (q.IMPORT_ENGRAMS, WRITE_BATCH, [engram_props(e, self.user) for e in engrams]),
            (q.IMPORT_CUES, WRITE_BATCH, [cue_props(c, self.user) for c in cues]),
            (q.IMPORT_LINKS, IMPORT_EDGE_BATCH,
             [{"engram": x.engram_id, "cue": x.cue_id, "strength": x.strength} for x in links]),
            (q.MERGE_ASSOCIATIONS, IMPORT_EDGE_BATCH, [association_row(a) for a in associations]),
            (q.IMPORT_COOCCURS, IMPORT_EDGE_BATCH,
             [{"source": c.source_id, "target": c.target_id, "strength": float(c.strength)}
              for c in cooccurrences]),
        ]  # fmt: skip
        for statement, size, rows in steps:
            for chunk in batched(rows, size):
                self._write(statement, rows=chunk)
        self._text_changed = self._text_changed or bool(engrams)
        self._counted(None)  # replaced ids are not new engrams: count again

    # -- reads -----------------------------------------------------------------------------
    def get_engrams(self, ids: Sequence[str], embeddings: bool = True) -> list[Engram]:
        """The user's engrams with these ids (without embeddings unless ``embeddings``);
        unknown ids are skipped."""
        if not ids:
            return []
        self._deferred.drain()
        statement = q.GET_ENGRAMS if embeddings else q.GET_ENGRAMS_BARE
        records = self._read(statement, ids=list(dict.fromkeys(ids)))
        return [engram_from(r["p"]) for r in records if whole(r["p"])]

    def list_page(self, listing: Listing) -> list[Engram]:
        """A filtered page in listing order, every filter and ``after`` inside one Cypher
        query before its ``LIMIT`` (``listing.list_statement``)."""
        if listing.limit <= 0:
            return []
        self._deferred.drain()
        statement, params = list_statement(listing, self.user)
        records = self._run(statement, read=True, **params)
        return [engram_from(r["p"]) for r in records if whole(r["p"])]

    def count_engrams(self) -> int:
        """How many engrams this user has (counted now; ``seek`` reuses the count)."""
        writes = self._writes
        total = int(self._read(q.COUNT_ENGRAMS)[0]["n"])
        self._set_total(total, writes)
        return total

    def counts(self) -> dict[str, int]:
        """Per-user counts of engrams, cues and each edge type."""
        return {k: int(v) for k, v in self._read(q.COUNTS)[0].items()}

    def engram_stats(self) -> Iterator[EngramStats]:
        """Consolidation fields of every engram, paged by id."""
        self._deferred.drain()
        for props in self._pages(q.ENGRAM_STATS_PAGE, WRITE_BATCH):
            yield stats_from(props)

    def _pages(self, statement: str, batch_size: int) -> Iterator[dict[str, Any]]:
        """Keyset pagination over ``statement`` (``$after``, ``$batch``, returns ``p``)."""
        after = ""
        while True:
            records = self._read(statement, after=after, batch=max(1, int(batch_size)))
            for record in records:
                yield record["p"]
            if len(records) < batch_size:
                return
            after = records[-1]["p"]["id"]

    def _edge_pages(self, statement: str) -> Iterator[list[Any]]:
        """Edge rows from ``statement``, walking start nodes in id order."""
        after = ""
        while True:
            records = self._read(statement, after=after, batch=WRITE_BATCH)
            if not records:
                return
            yield from records[0]["rows"]
            if records[0]["seen"] < WRITE_BATCH:
                return
            after = records[0]["last"]

    # -- recall reads -----------------------------------------------------------------------
    def get_cues(self, names: Sequence[str]) -> list[Cue]:
        """The user's cues whose normalised name is among ``names``."""
        keys = list(dict.fromkeys(normalise_cue_name(n) for n in names))
        return [cue_from(r["p"]) for r in self._read(q.GET_CUES, keys=keys)] if keys else []

    def get_cues_by_id(self, ids: Sequence[str]) -> list[Cue]:
        """The user's cues with these ids, through the ``(user, id)`` constraint's index."""
        if not ids:
            return []
        return [cue_from(r["p"]) for r in self._read(q.GET_CUES_BY_ID, ids=list(set(ids)))]

    def seek(self, query: Seek) -> Seeds:
        """Every channel of ``query`` in one round trip (``reads.seek_statement``; the
        engram vector channel as a second statement sent at once, ``_seek_record``)."""
        return self._seek(query, total=True)

    def vector_search_above(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[str, float]]:
        """The vector channel of ``seek`` alone, without the engram count."""
        return self._seek(Seek(k=k, vector=embedding, vector_floor=min_score), total=False).vector

    def nearest_engrams(
        self, embedding: np.ndarray, k: int, min_score: float
    ) -> list[tuple[Engram, float]]:
        """``vector_search_above`` with the candidates' engrams read in the same query."""
        self._deferred.drain()  # the engrams' access fields are read too
        query = Seek(k=k, vector=embedding, vector_floor=min_score)
        seeds, record = self._seek_record(query, total=False, engrams=True)
        if record is None:
            return []
        found = [engram_from(p) for p in record.get("engrams") or () if whole(p)]
        return joined(seeds.vector, found)

    def _seek(self, query: Seek, *, total: bool) -> Seeds:
        return self._seek_record(query, total=total)[0]

    def _seek_record(
        self, query: Seek, *, total: bool, engrams: bool = False
    ) -> tuple[Seeds, Mapping[str, Any] | None]:
        """The seeds of ``query`` and the record they came from (None when nothing was
        asked); ``engrams`` as in ``reads.seek_statement``.

        A recall's engram vector query and its other channels run as two statements at
        once (``_split``): the server runs a statement's subqueries one after another,
        and the vector query alone took about as long as the rest together at 100k
        memories."""
        engram_index = self._index_for("Engram", query.vector)
        cue_index = self._index_for("Cue", _first_row(query.cue_vectors))
        writes, count = self._writes, total and self._total_stale()
        if query.text and self._text_changed:
            self._text_changed = False  # before the wait: a write meanwhile sets it again
            self._run(q.AWAIT_TEXT, read=True)
        split = _split(query)
        if split is None:
            record = self._seek_part(query, engram_index, cue_index, count, engrams)
        else:
            vector, rest = split
            pending = self._parallel().submit(
                self._seek_part, vector, engram_index, None, False, engrams
            )
            try:
                other = self._seek_part(rest, None, cue_index, count, False)
            finally:
                first = pending.result()  # never left running behind an error
            record = {**(first or {}), **(other or {})}
        if record is None:
            return Seeds(total=(self._total or 0) if total else 0), None
        seeds = seeds_from(record, query)
        self._note_share(record, query)
        if count:
            self._set_total(seeds.total, writes)
        elif total:
            seeds.total = self._total or 0
        return seeds, record

    def _seek_part(
        self,
        query: Seek,
        engram_index: str | None,
        cue_index: str | None,
        count: bool,
        engrams: bool,
    ) -> dict[str, Any] | None:
        """The record of one ``seek_statement`` (None when it asks nothing)."""
        from neo4j.exceptions import ClientError

        built = seek_statement(query, self.user, engram_index, cue_index, total=count,
                               engrams=engrams, share=self._share)  # fmt: skip
        if built is None:
            return None
        try:
            records = self._run(built[0], read=True, **built[1])
        except BackendError as exc:
            # A vector index dropped or rebuilt under us: answer exactly this time.
            indexed = engram_index is not None or cue_index is not None
            if not indexed or not isinstance(exc.__cause__, ClientError):
                raise
            log.warning("neo4j vector index query failed; exact search", error=str(exc))
            self._refresh_vector_indexes()
            built = seek_statement(query, self.user, None, None, total=count, engrams=engrams)
            assert built is not None
            records = self._run(built[0], read=True, **built[1])
        return dict(records[0].items())

    def _parallel(self) -> ThreadPoolExecutor:
        """The threads that run a seek's vector statement beside its other channels."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(SEEK_THREADS, thread_name_prefix="smriti-neo4j")
            return self._pool

    def _note_share(self, record: Any, query: Seek) -> None:
        """Remember the user's share of an unfiltered first vector stage's hits."""
        mine, raw = record.get("share") or (0, 0)
        if raw and query.memory_type is None:
            self._share = max(MIN_SHARE, mine / raw)

    def _total_stale(self) -> bool:
        with self._lock:
            return self._total is None or time.monotonic() - self._total_at > TOTAL_SECONDS

    def _set_total(self, total: int, writes: int) -> None:
        """Remember a count read while no write of this backend ran (else it may miss one)."""
        with self._lock:
            if self._writes == writes:
                self._total, self._total_at = total, time.monotonic()

    def _counted(self, change: int | None) -> None:
        """This backend's write changed the count by ``change`` (None: by an unknown amount)."""
        with self._lock:
            self._writes += 1
            if self._total is not None and change is not None:
                self._total = max(0, self._total + change)
            elif change is None:
                self._total = None

    def _index_for(self, label: str, vector: np.ndarray | None) -> str | None:
        """The usable vector index on ``label`` for vectors as wide as ``vector``."""
        index = self._vector_indexes.get(label)
        if index is None or vector is None or index.dims != np.asarray(vector).size:
            return None
        return index.name

    def neighbourhood(self, query: Expand) -> Neighbourhood:
        """One hop around ``query.ids`` in one Cypher query (``reads.neighbourhood_statement``)."""
        built = neighbourhood_statement(query, self.user)
        if built is None:
            return Neighbourhood()
        return neighbourhood_from(self._run(built[0], read=True, **built[1])[0], query)

    # -- streams -------------------------------------------------------------------------------
    def iter_engrams(self, batch_size: int = 1000) -> Iterator[Engram]:
        """Every engram with its embedding, ordered by id, ``batch_size`` per query."""
        self._deferred.drain()
        for props in self._pages(q.ENGRAMS_PAGE, batch_size):
            if whole(props):
                yield engram_from(props)

    def iter_cues(self) -> Iterator[Cue]:
        """Every cue with its embedding, ordered by id."""
        for props in self._pages(q.CUES_PAGE, WRITE_BATCH):
            yield cue_from(props)

    def iter_links(self) -> Iterator[Link]:
        """Every EncodedBy edge of the user."""
        for eid, cid, strength in self._edge_pages(q.LINKS_PAGE):
            yield Link(eid, cid, float(strength))

    def iter_associations(self) -> Iterator[Association]:
        """Every AssociatedWith edge of the user."""
        for row in self._edge_pages(q.ASSOCIATIONS_PAGE):
            yield association_from(row)

    def iter_cooccurrences(self) -> Iterator[CoOccurrence]:
        """Every CoOccurs edge of the user."""
        for source, target, strength in self._edge_pages(q.COOCCURS_PAGE):
            yield CoOccurrence(source, target, float(strength))


@dataclass(frozen=True, slots=True)
class _VectorIndex:
    name: str
    dims: int
    cosine: bool
    online: bool


def _unexpected(cause: BaseException | None) -> bool:
    """Whether ``cause`` is Neo4j's GQL status 50N42, "Unexpected error": an internal
    failure, which a concurrent delete under a running query can cause. Every statement
    here is safe to run again (reads; writes that are idempotent, or guarded by the
    engram id constraint), so it is treated as transient."""
    from neo4j.exceptions import Neo4jError

    return isinstance(cause, Neo4jError) and cause.find_by_gql_status("50N42") is not None


def _timed_out(cause: BaseException | None) -> bool:
    """Whether ``cause`` is the server ending a statement at its client-given timeout."""
    code = getattr(cause, "code", None) or ""
    return code.startswith("Neo.ClientError.Transaction.TransactionTimedOut")


def _split(query: Seek) -> tuple[Seek, Seek] | None:
    """(the engram vector channel, every other channel) of a query that asks for both."""
    if query.vector is None or query.k <= 0:
        return None
    others = bool(query.text) or bool(query.cue_names) or _first_row(query.cue_vectors) is not None
    if not others:
        return None
    vector = replace(query, text=None, cue_names=(), cue_vectors=None)
    return vector, replace(query, vector=None)


def _first_row(vectors: np.ndarray | None) -> np.ndarray | None:
    if vectors is None or np.asarray(vectors).size == 0:
        return None
    matrix = np.asarray(vectors)
    return matrix[0] if matrix.ndim > 1 else matrix


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(text).strip().splitlines()[0]
