"""Index management: range, full-text and HNSW vector indexes on one graph.

FalkorDB builds indexes in the background (status ``UNDER CONSTRUCTION`` until it is
``OPERATIONAL``); searches use a vector index only once it is operational and fall back
to an exact scan before that. Index statements take no parameters, so the dimension is
formatted in as an ``int`` and labels are constants: no user text reaches them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smriti import get_logger
from smriti.backend import BackendError
from smriti_backend_falkor import queries as Q

log = get_logger(__name__)

#: Search-time candidate list of the HNSW index. FalkorDB's default (10) gives poor
#: recall; 100 is the floor this project requires, the search also over-fetches.
EF_RUNTIME = 200
EF_CONSTRUCTION = 200
HNSW_M = 16
VECTOR_LABELS = ("Engram", "Cue")
#: Seconds to wait for a new index to be built before searching without it.
BUILD_WAIT = 60.0

Run = Callable[..., list]
RunSchema = Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """One field of one index as ``db.indexes()`` reports it."""

    label: str
    field: str
    kind: str  # RANGE | FULLTEXT | VECTOR
    dimension: int | None
    operational: bool


class IndexState:
    """Cached view of a graph's indexes; refreshed when it may be stale."""

    def __init__(self, run: Run, run_schema: RunSchema) -> None:
        self._run = run
        self._run_schema = run_schema
        self._infos: list[IndexInfo] = []
        self.refresh()

    def refresh(self) -> None:
        """Re-read the graph's indexes."""
        infos: list[IndexInfo] = []
        for label, props, types, options, entity, status in self._run(Q.LIST_INDEXES, read=True):
            if entity != "NODE":
                continue
            for prop in props:
                for kind in types.get(prop, []):
                    opts = (options or {}).get(prop) or {}
                    dim = opts.get("dimension") if kind == "VECTOR" else None
                    infos.append(IndexInfo(label, prop, kind, dim, status == "OPERATIONAL"))
        self._infos = infos

    def _has(self, label: str, field: str, kind: str) -> IndexInfo | None:
        return next(
            (i for i in self._infos if (i.label, i.field, i.kind) == (label, field, kind)), None
        )

    def ensure_base(self) -> list[str]:
        """Range indexes on ids, keys and ``user``, and the Engram full-text index."""
        created: list[str] = []
        for label, field in Q.RANGE_INDEXES:
            if not self._has(label, field, "RANGE"):
                self._create(f"CREATE INDEX FOR (n:{label}) ON (n.{field})")
                created.append(f"{label}.{field}")
        created += self._ensure_fulltext()
        if created:
            self.wait_operational()
        return created

    def _ensure_fulltext(self) -> list[str]:
        label = Q.FULLTEXT_LABEL
        missing = [f for f in Q.FULLTEXT_FIELDS if not self._has(label, f, "FULLTEXT")]
        if not missing:
            return []
        fields = ", ".join(f"'{f}'" for f in missing)
        if len(missing) == len(Q.FULLTEXT_FIELDS):
            # Stopwords off: short memories are often nothing but common words. The
            # options map can only be given when the index is first created.
            self._create(
                f"CALL db.idx.fulltext.createNodeIndex({{label: '{label}', stopwords: []}}, "
                f"{fields})"
            )
        else:
            self._create(f"CALL db.idx.fulltext.createNodeIndex('{label}', {fields})")
        return [f"{label}.{f} (fulltext)" for f in missing]

    def has_all_vector(self, dims: int) -> bool:
        """True when every vector index exists with dimension ``dims``."""
        return all(self._vector(label) == dims for label in VECTOR_LABELS)

    def _vector(self, label: str) -> int | None:
        info = self._has(label, "embedding", "VECTOR")
        return None if info is None else int(info.dimension or 0)

    def ensure_search(self, dims: int) -> list[str]:
        """Create the cosine HNSW indexes (and any missing full-text field)."""
        dims = int(dims)
        created = self._ensure_fulltext()
        for label in VECTOR_LABELS:
            current = self._vector(label)
            if current == dims:
                continue
            if current is not None:
                log.warning(
                    "falkordb_vector_index_dims_changed", label=label, old=current, new=dims
                )
                self._create(f"DROP VECTOR INDEX FOR (n:{label}) ON (n.embedding)")
            self._create(
                f"CREATE VECTOR INDEX FOR (n:{label}) ON (n.embedding) OPTIONS "
                f"{{dimension: {dims}, similarityFunction: 'cosine', M: {HNSW_M}, "
                f"efConstruction: {EF_CONSTRUCTION}, efRuntime: {EF_RUNTIME}}}"
            )
            created.append(f"{label}.embedding (vector, cosine, {dims}d)")
        if created:
            self.wait_operational()
            log.info("falkordb_indexes_created", indexes=created)
        return created

    def vector_ready(self, label: str, dims: int) -> bool:
        """True when ``label``'s vector index exists for ``dims`` and is operational."""
        info = self._has(label, "embedding", "VECTOR")
        if info is None or info.dimension != dims:
            return False
        if not info.operational:
            self.refresh()
            info = self._has(label, "embedding", "VECTOR")
        return info is not None and info.operational

    def wait_operational(self, timeout: float = BUILD_WAIT) -> bool:
        """Wait (bounded) until new indexes are built: FalkorDB builds them in the
        background and a full-text index answers nothing until it is operational."""
        deadline = time.monotonic() + timeout
        while not self.all_operational():
            if time.monotonic() > deadline:
                log.warning("falkordb_index_build_slow", waited_s=timeout)
                return False
            time.sleep(0.02)
        return True

    def all_operational(self) -> bool:
        """True when no index of the graph is still being built."""
        self.refresh()
        return all(i.operational for i in self._infos)

    def _create(self, statement: str) -> None:
        try:
            self._run_schema(statement)
        except BackendError as exc:
            if "already indexed" in str(exc) or "already exists" in str(exc):
                return  # another backend (user) of this graph created it first
            raise
