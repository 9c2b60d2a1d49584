"""Re-embedding a store with the current embedder (``smriti reembed``).

A store remembers the embedding model its vectors came from (the ``embedding_model``
meta key) and refuses an embedder with another id, since vectors of two models must
never be mixed. When a better model becomes available (the local sentence model,
downloaded after a first offline start made the store with the lexical embedder), this
moves the store to it: every engram's content and every cue's name is embedded again in
batches and written back with ``StorageBackend.import_records`` (which replaces records
by id, keeps every edge and updates the backend's vector index and caches).

While it runs the meta key says ``reembedding:<new model>``, so a store left half done
(a crash, Ctrl-C) is refused by every embedder until ``reembed`` runs again and
finishes; running it again re-embeds everything, so it is safe to repeat.

What is kept as it was: the AssociatedWith edges and their strengths (computed with
the old model when each memory was stored), cluster ids, and every other property.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from smriti.errors import ConfigError
from smriti.logs import get_logger

if TYPE_CHECKING:
    from smriti.engine.core import Engine
    from smriti.progress import Progress

log = get_logger(__name__)

#: Prefix of the meta value while a re-embedding is under way.
IN_PROGRESS = "reembedding:"
DEFAULT_BATCH = 256


@dataclass(slots=True)
class ReembedReport:
    """What ``reembed`` did."""

    user: str
    old_model: str | None
    new_model: str
    engrams: int = 0
    cues: int = 0
    seconds: float = 0.0
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


def reembed(
    engine: Engine,
    *,
    batch_size: int = DEFAULT_BATCH,
    force: bool = False,
    progress: Progress | None = None,
) -> ReembedReport:
    """Embed every engram and cue of ``engine``'s store again with its embedder.

    Skipped (``skipped=True``) when the store already uses the embedder's model, unless
    ``force``. Raises ConfigError when the embedder is not the one configured (a model
    that fell back to another embedder) or when the dimension would change.
    """
    from smriti.engine.core import EMBEDDING_MODEL_KEY

    backend, embedder = engine.backend, engine.configured_embedder
    dims = int(embedder.embed(["dimension probe"]).shape[1])  # waits for a model to load
    failure = getattr(embedder, "failure", None)
    if failure:
        raise ConfigError(
            f"the configured embedding model is not available ({failure}); nothing was re-embedded"
        )
    new = embedder.model_id
    old = backend.get_meta(EMBEDDING_MODEL_KEY)
    report = ReembedReport(engine.user, old, new)
    if old == new and not force:
        report.skipped = True
        return report
    _check_dims(engine, dims)
    started = time.perf_counter()
    # Alone: a memory stored meanwhile would keep the old model's vector, and one
    # forgotten meanwhile would be written back (other processes share the store).
    with engine.writes.exclusive():
        backend.set_meta(EMBEDDING_MODEL_KEY, IN_PROGRESS + new)
        log.info("re-embedding", user=engine.user, old_model=old, new_model=new)
        report.engrams = _engrams(engine, batch_size, progress)
        report.cues = _cues(engine, batch_size, progress)
        backend.set_meta(EMBEDDING_MODEL_KEY, new)
        engine.use_embedder(embedder)
    backend.ensure_indexes(dims, engine.settings.index_threshold)
    engine.dirty.set()  # the next backup pushes the new vectors
    report.seconds = round(time.perf_counter() - started, 3)
    log.info("re-embedded", **report.to_dict())
    return report


def _check_dims(engine: Engine, dims: int) -> None:
    first = next(iter(engine.backend.iter_engrams(batch_size=1)), None)
    if first is None or first.embedding is None or first.embedding.size == dims:
        return
    raise ConfigError(
        f"the store's vectors have {first.embedding.size} dimensions and "
        f"{engine.configured_embedder.model_id} makes {dims}; a backend's vector index is "
        "built for one dimension, so move to this model with `smriti export`, then `smriti import` "
        "into a new store (STORAGE_LOCATION or --user)"
    )


def _engrams(engine: Engine, batch_size: int, progress: Progress | None) -> int:
    backend = engine.backend
    # Ids first: the backend is written between batches, so no read stays open meanwhile.
    ids = [e.id for e in backend.iter_engrams(batch_size=max(batch_size, 1000))]
    if progress is not None:
        progress.set_label("re-embedding memories", len(ids))
    for chunk in _batched(ids, batch_size):
        engrams = backend.get_engrams(chunk)
        vectors = _embed(engine, [e.content for e in engrams])
        backend.import_records(
            [e.with_changes(embedding=v) for e, v in zip(engrams, vectors, strict=True)],
            [],
            [],
            [],
            [],
        )
        if progress is not None:
            progress.advance(len(chunk))
    return len(ids)


def _cues(engine: Engine, batch_size: int, progress: Progress | None) -> int:
    backend = engine.backend
    cues = [(c.id, c.name, c.cue_type) for c in backend.iter_cues()]
    if progress is not None:
        progress.set_label("re-embedding cues", len(cues))
    from smriti.model import Cue

    for chunk in _batched(cues, batch_size):
        vectors = _embed(engine, [name for _, name, _ in chunk])
        backend.import_records(
            [],
            [Cue(i, n, t, v) for (i, n, t), v in zip(chunk, vectors, strict=True)],
            [],
            [],
            [],
        )
        if progress is not None:
            progress.advance(len(chunk))
    return len(cues)


def _embed(engine: Engine, texts: list[str]) -> np.ndarray:
    # The embedder directly: Engine.embed would check the store's model, which is the
    # old one until the end.
    return np.asarray(engine.configured_embedder.embed(texts), dtype=np.float32)


def _batched[T](items: Sequence[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), max(1, size)):
        yield list(items[start : start + size])
