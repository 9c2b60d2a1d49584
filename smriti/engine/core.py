"""The Engine: one user's memory, wiring backend, embedder, extractor, clusterer, backup."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pluggy

from smriti.backend import StorageBackend, WriteGate
from smriti.backup import SyncReport
from smriti.config import Settings, validate_user
from smriti.embedding import Embedder, SimilarityScale
from smriti.engine import components, versions
from smriti.engine.background import Background
from smriti.engine.consolidate import ConsolidationReport, consolidate
from smriti.engine.contiguity import Timeline
from smriti.engine.erasure import Erasure
from smriti.engine.recall import RecallResults, recall
from smriti.engine.store import StoreOutcome, store
from smriti.errors import ConfigError, NotFound
from smriti.index import heap
from smriti.logs import get_logger
from smriti.model import Cue, Engram
from smriti.plugins import Registry, create_plugin_manager
from smriti.progress import ProgressArg
from smriti.requests import (
    CorrectRequest,
    DuplicatesRequest,
    ForgetRequest,
    GetRequest,
    HistoryRequest,
    MergeRequest,
    PurgeRequest,
    RecallRequest,
    RelatedRequest,
    StoreRequest,
    UpdateRequest,
)

log = get_logger(__name__)

EMBEDDING_MODEL_KEY = "embedding_model"
CUE_CACHE_SIZE = 20_000
INDEX_CHECK_EVERY = 50


def _request[R](cls: type[R], given: object, *args: object, **options: object) -> R:
    """``given`` when it is a ``cls`` request; else the request ``cls.parse`` builds from
    ``given``, ``args`` and ``options`` (the keyword convenience of an Engine method)."""
    if isinstance(given, cls):
        return given
    return cls.parse(given, *args, **options)  # type: ignore[attr-defined, no-any-return]


class Engine:
    """Store, recall, forget and consolidate one user's memories.

    Build with ``Engine.from_settings``; use as a context manager or call ``open`` and
    ``close``. Methods are thread-safe; no lock is held across embedding or LLM calls.
    """

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        user: str | None = None,
        backend: StorageBackend | None = None,
    ) -> None:
        """``backend``, when given, is used (unopened) instead of the one ``DB_TYPE``
        chooses, as it is: a backend test compares the engine on it with another."""
        self.settings = settings
        self.registry = registry
        self.user = validate_user(user or settings.accessing_user)
        self.backend = backend or components.choose_backend(registry, settings, self.user)
        self.embedder = components.choose_embedder(registry, settings)
        #: The embedder the settings choose; ``embedder`` may be the store's own instead
        #: (see ``_check_model``) until ``smriti reembed`` moves the store to this one.
        self.configured_embedder = self.embedder
        self.extractor = components.choose_extractor(registry, settings)
        self.clusterer = components.choose_clusterer(registry, settings)
        self.backup = components.choose_backup(registry, settings, self.user)
        self._cue_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._content_locks = [threading.Lock() for _ in range(64)]
        self._writes = 0
        self._size = 0
        self._model_checked = False
        self.dirty = threading.Event()
        #: Serialises backup syncs (each fetches and merges the remote, then pushes).
        self.push_lock = threading.Lock()
        self.background = Background(self)
        #: When forgotten memories are erased from the store's files.
        self.erasure = Erasure(self)
        #: Stores and forgets pass together; ``smriti reembed`` passes alone.
        self.writes = WriteGate()
        self._helper: ThreadPoolExecutor | None = None
        #: The memory a new one follows (``smriti.engine.contiguity``).
        self.timeline = Timeline(settings.contiguity_seconds)
        self.is_open = False

    @classmethod
    def from_settings(
        cls, settings: Settings, pm: pluggy.PluginManager | None = None, user: str | None = None
    ) -> Engine:
        """An engine for ``settings`` with plugins from ``pm`` (default: installed ones)."""
        if pm is None:
            pm, _ = create_plugin_manager(environ=settings.env or None)
        return cls(settings, Registry(pm), user)

    # -- lifecycle -------------------------------------------------------------------
    def open(self) -> Engine:
        """Open the store (restoring from backup first when configured and empty)."""
        from smriti.engine.snapshots import restore_if_empty
        from smriti.store_dir import prepare_store

        # Before the backend creates anything: an older mixed-case spelling of the
        # user's directory is adopted, and a store left readable by others is tightened.
        prepare_store(self.settings.storage_location, self.user)
        self.backend.open()
        self.is_open = True
        restore_if_empty(self)
        self._size = self.backend.count_engrams()
        self.erasure.at_open()
        log.info(
            "memory opened",
            user=self.user,
            backend=self.backend.name,
            embedder=self.embedder.name,
            extractor=self.extractor.name,
            engrams=self._size,
        )
        return self

    def close(self) -> None:
        """Stop background work, push a final backup if anything changed, close."""
        if not self.is_open:
            return
        self.background.stop()
        self.erasure.flush()
        if self.dirty.is_set() and self.backup.name != "none":
            try:
                self.sync()
            except Exception as exc:
                log.error("final backup failed", error=str(exc))
        with self._lock:
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.shutdown(wait=True)
        self.backend.close()
        self.embedder.close()
        if self.configured_embedder is not self.embedder:  # the store kept its own model
            self.configured_embedder.close()
        self.extractor.close()
        self.backup.close()
        self.is_open = False

    def helper(self) -> ThreadPoolExecutor:
        """A one-thread pool for work that overlaps backend writes (consolidation's
        clustering); kept for the engine's life so a backend sees one more thread, not
        one per run, and shut down by ``close``."""
        with self._lock:
            if self._helper is None:
                self._helper = ThreadPoolExecutor(1, thread_name_prefix="smriti-helper")
            return self._helper

    def __enter__(self) -> Engine:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_background(self) -> None:
        """Start periodic consolidation and backup threads (per the intervals)."""
        self.background.start()

    def stop_background(self) -> None:
        """Stop the periodic threads."""
        self.background.stop()

    # -- operations --------------------------------------------------------------------
    def store(
        self, content: StoreRequest | object, *args: object, **options: object
    ) -> StoreOutcome:
        """Remember what a StoreRequest asks; InvalidInput for bad arguments.

        ``content`` is the request, or the text to remember with ``args`` and
        ``options`` as ``StoreRequest.parse`` takes them (``importance``, ``tags``,
        ``source``, ``memory_id``, ``occurred_at``, ``origin``, ``principal``): a
        convenience for Python callers, which builds the request. ``memory_id`` makes a
        repeated store idempotent; ``occurred_at`` dates an event stored after the fact
        (see ``smriti.engine.store``); an application storing through this API is an
        agent unless it says otherwise.
        """
        limit = {"max_chars": self.settings.max_content_chars}
        request = _request(StoreRequest, content, *args, **options, **limit)
        with self.writes.shared():
            return store(self, request)

    def recall(
        self, query: RecallRequest | object = None, *args: object, **options: object
    ) -> RecallResults:
        """Recall memories as a RecallRequest asks (``smriti.engine.recall``).

        ``query`` is the request, or the query text with ``args`` and ``options`` as
        ``RecallRequest.parse`` takes them (``limit``, ``mode``, ``memory_type``,
        ``tags``, ``tag_match``, ``since``, ``until``, ``include_superseded``,
        ``cursor``, ``origin``): a convenience for Python callers, which builds the
        request.
        """
        limit = {"max_limit": self.settings.max_recall_limit}
        request = _request(RecallRequest, query, *args, **options, **limit)
        return recall(self, request)

    def get(self, memory_id: GetRequest | object) -> dict[str, Any]:
        """One memory with its cues, associations and version chain (a GetRequest, or
        the memory's id)."""
        request = _request(GetRequest, memory_id)
        return versions.get(self, request.memory_id)

    def correct(
        self, memory_id: CorrectRequest | object, *args: object, **options: object
    ) -> dict[str, Any]:
        """A new version of a memory; the old one is kept, marked superseded
        (``smriti.engine.versions``). ``memory_id`` is a CorrectRequest, or the id with
        ``args`` and ``options`` as ``CorrectRequest.parse`` takes them (``content``,
        ``importance``, ``tags``, ``new_id``, ``origin``, ``principal``, ``purge``).
        ``origin`` None keeps the old version's; ``principal`` is the authenticated
        caller making the correction, if any. With ``purge``, every earlier version is
        forgotten and erased instead of kept (``smriti.engine.purge``); the answer's
        ``purged`` lists their ids."""
        from smriti.engine.purge import purge_versions

        request = _request(CorrectRequest, memory_id, *args, **options)
        result = versions.correct(self, request)
        if request.purge:
            result["purged"] = purge_versions(self, result["new_id"])
        return result

    def history(self, memory_id: HistoryRequest | object) -> dict[str, Any]:
        """The versions of a memory, oldest first (a HistoryRequest, or the id)."""
        request = _request(HistoryRequest, memory_id)
        return versions.history(self, request.memory_id)

    def update(
        self, memory_id: UpdateRequest | object, *args: object, **options: object
    ) -> dict[str, Any]:
        """Change a memory's importance and/or tags in place: an UpdateRequest, or the
        id with ``importance`` and ``tags`` (``UpdateRequest.parse``)."""
        request = _request(UpdateRequest, memory_id, *args, **options)
        tags = None if request.tags is None else list(request.tags)
        return versions.update(self, request.memory_id, request.importance, tags)

    def related(
        self, memory_id: RelatedRequest | object, *args: object, **options: object
    ) -> dict[str, Any]:
        """Memories linked to a memory, with relation and strength: a RelatedRequest, or
        the id with ``limit`` (``RelatedRequest.parse``)."""
        request = _request(RelatedRequest, memory_id, *args, **options)
        return versions.related(self, request.memory_id, request.limit)

    def duplicates(
        self, threshold: DuplicatesRequest | object = None, *args: object, **options: object
    ) -> dict[str, Any]:
        """Groups of near-duplicate memories and stale ones (``smriti.engine.tidy``): a
        DuplicatesRequest, or ``threshold``, ``limit`` and ``stale_days``."""
        from smriti.engine import tidy

        request = _request(DuplicatesRequest, threshold, *args, **options)
        return tidy.duplicates_report(self, request.threshold, request.limit, request.stale_days)

    def merge(
        self, memory_id: MergeRequest | object, *args: object, **options: object
    ) -> dict[str, Any]:
        """Merge memories into one (``smriti.engine.tidy``): a MergeRequest, or the
        survivor's id and ``memory_ids``."""
        from smriti.engine import tidy

        request = _request(MergeRequest, memory_id, *args, **options)
        return tidy.merge(self, request.memory_id, list(request.memory_ids))

    def content_lock(self, key: str) -> threading.Lock:
        """One of a fixed set of locks, chosen by ``key``: stores of the same text pass
        the duplicate check one at a time."""
        return self._content_locks[hash(key) % len(self._content_locks)]

    def forget(self, memory_id: ForgetRequest | object) -> Engram:
        """Delete one of this user's memories (a ForgetRequest, or the id); NotFound for
        unknown or foreign ids."""
        request = _request(ForgetRequest, memory_id)
        with self.writes.shared():
            return self._forget(request.memory_id)

    def _forget(self, key: str) -> Engram:
        from smriti.portable import tombstones

        found = self.backend.get_engrams([key])
        # The tombstone first (backups merge by union: without it the memory would come
        # back from another machine's copy); the lock keeps a merge from interleaving.
        with tombstones.LOCK:
            if found:
                tombstones.record(self.backend, [tombstones.forgotten(key)])
            if not found or not self.backend.delete_engrams([key]):
                raise NotFound(f"no memory with id {key!r} for user {self.user!r}")
        self.forgotten_locally([key])
        self.erasure.request()
        return found[0]

    def forgotten_locally(self, keys: Sequence[str]) -> None:
        """Bookkeeping after memories were deleted: size, timeline, dirty flag."""
        self._size = max(0, self._size - len(keys))
        for key in keys:
            self.timeline.forget(key)
        self.dirty.set()

    def purge(self, memory_id: PurgeRequest | object) -> dict[str, Any]:
        """Forget a memory (a PurgeRequest, or the id), erase it here and remove it from
        the backup's history (``smriti.engine.purge``); also for a memory already
        forgotten here."""
        from smriti.engine.purge import purge

        return purge(self, _request(PurgeRequest, memory_id).memory_id)

    def erase(self) -> None:
        """Drop the cues that only deleted memories held (with their co-occurrences), then
        erase what deleted memories left in the store's files, before returning
        (``StorageBackend.erase_deleted``). A forget asks for it through ``erasure``,
        which runs it soon after (``smriti.engine.erasure``)."""
        self.erasure.now()

    def consolidate(self, progress: ProgressArg = False) -> ConsolidationReport:
        """Run consolidation now; ``progress`` as ``smriti.progress`` describes (off by
        default, so periodic runs draw nothing)."""
        report = consolidate(self, progress)
        heap.release()  # pruning and clustering freed tens of MB
        self._size = self.backend.count_engrams()
        if report.pruned or report.reclustered or report.decayed:
            self.dirty.set()
        log.info("consolidated", **report.to_dict())
        return report

    def sync(self, progress: ProgressArg = False) -> SyncReport:
        """Push a consistent snapshot to the backup provider now (``progress``: its
        phases, off by default)."""
        from smriti.engine.snapshots import push_snapshot

        return push_snapshot(self, progress)

    def stats(self) -> dict[str, Any]:
        """Counts and the components in use (and the working set, when there is one)."""
        status = getattr(self.backend, "working_set_status", None)
        return {
            "user": self.user,
            "backend": self.backend.name,
            "embedder": self.embedder.name,
            "embedding_model": self.embedder.model_id,
            "extractor": getattr(self.extractor, "primary", self.extractor).name,
            "clusterer": self.clusterer.name if self.clusterer else None,
            "backup": self.backup.name,
            **self.backend.counts(),
            **({"working_set": status()} if callable(status) else {}),
        }

    # -- helpers for the pipelines -------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts, checking once that the store's vectors come from this model."""
        embedder = self.embedder
        vectors = embedder.embed(list(texts))
        if not self._model_checked:
            self._check_model()
        if self.embedder is not embedder:  # swapped for the store's own embedder
            vectors = self.embedder.embed(list(texts))
        return vectors

    @property
    def scale(self) -> SimilarityScale:
        """The embedder's cosines on the engine's common scale (read after embedding:
        the first embedding may swap in the store's own embedder)."""
        return SimilarityScale(self.embedder.similarity_baseline)

    def _check_model(self) -> None:
        """Compare the store's embedding model with the embedder, once.

        Under ``SMRITI_EMBEDDER=auto`` a store made with another installed embedder
        (the lexical one, before the local model was downloaded; the local model, before
        an API key was set) keeps that embedder, with a warning naming ``smriti
        reembed``, instead of refusing every call. A named embedder, or a store whose
        model no installed embedder makes, is a ConfigError.
        """
        with self._lock:
            if self._model_checked:
                return
            stored = self.backend.get_meta(EMBEDDING_MODEL_KEY)
            current = self.embedder.model_id
            if stored is None:
                self.backend.set_meta(EMBEDDING_MODEL_KEY, current)
            elif stored != current:
                self.embedder = self._store_embedder(stored, current)
            self._model_checked = True

    def use_embedder(self, embedder: Embedder) -> None:
        """Embed with ``embedder`` from now on: the store's vectors are now its model's
        (``smriti reembed`` calls this when it is done). Cached cue vectors are dropped."""
        with self._lock:
            self.embedder = embedder
            self._model_checked = True
            self._cue_cache.clear()

    def _store_embedder(self, stored: str, current: str) -> Embedder:
        advice = (
            "run `smriti reembed` to move the store to the configured model, or restore "
            "the previous embedding settings"
        )
        own = self.configured_embedder.for_model(stored)
        if own is not None:
            log.warning(
                "this store was embedded with an earlier model than the configured one; "
                f"keeping it for this store: {advice}",
                store_model=stored,
                configured_model=current,
            )
            return own
        if self.settings.embedder == "auto":
            maker = stored.split(":", 1)[0]  # a model id begins with its embedder's name
            for cls in self.registry.unique("embedder"):
                if cls.name != maker or cls.name == self.configured_embedder.name:
                    continue  # building another embedder may start a model download
                other = cls.from_settings(self.settings)
                if other is not None and other.model_id == stored:
                    log.warning(
                        "this store was embedded with another model than the preferred "
                        f"one; keeping it for this store: {advice}",
                        store_model=stored,
                        preferred_model=current,
                    )
                    return other
                if other is not None:
                    other.close()
        raise ConfigError(
            f"this store's memories were embedded with {stored!r} but the configured "
            f"embedder is {current!r}; {advice}"
        )

    def cue_vectors(self, names: Iterable[str]) -> dict[str, np.ndarray]:
        """Known embeddings of cue names: from the cache, else from the store."""
        wanted = list(dict.fromkeys(names))
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for name in wanted:
                if name in self._cue_cache:
                    out[name] = self._cue_cache[name]
        missing = [n for n in wanted if n not in out]
        if missing:
            for cue in self.backend.get_cues(missing):
                if cue.embedding is not None:
                    out[cue.name] = cue.embedding
        return out

    def after_write(self, cues: Sequence[Cue]) -> None:
        """Bookkeeping after a store: cue cache, dirty flag, index creation."""
        with self._lock:
            for cue in cues:
                if cue.embedding is not None:
                    self._cue_cache[cue.name] = cue.embedding
                    self._cue_cache.move_to_end(cue.name)
            while len(self._cue_cache) > CUE_CACHE_SIZE:
                self._cue_cache.popitem(last=False)
            self._writes += 1
            self._size += 1
            check = (
                self._writes % INDEX_CHECK_EVERY == 0
                or self._size == self.settings.index_threshold + 1
            )
        self.dirty.set()
        if check and self.embedder.dims:
            self.backend.ensure_indexes(self.embedder.dims, self.settings.index_threshold)
