"""The default embedder: the pinned model, fetched and loaded in a background thread.

The server must answer MCP ``initialize`` at once, so nothing here blocks the
constructor: it starts a thread that checks the cached files (downloading them on first
use) and loads the ONNX session. ``model_id`` and ``dims`` come from the pinned spec, so
they are known before the model is. ``embed`` waits for the thread, at most
``SMRITI_LOCAL_LOAD_TIMEOUT`` seconds (default 300): a store or recall that arrives
while the model loads is answered once it is ready, or gets a ProviderError saying the
download is still running. When the model cannot be had (offline with nothing cached,
a server error, a checksum mismatch) and Smriti chose this embedder on its own
(``SMRITI_EMBEDDER=auto``), the fallback embedder (the built-in lexical one) takes over
with one warning; when the user named ``local`` there is no fallback and ``embed``
raises ProviderError with the reason.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np

from smriti import ConfigError, Embedder, Progress, ProviderError, get_logger
from smriti_embedder_local.baselines import baseline_of
from smriti_embedder_local.pinned import (
    ModelSpec,
    ModelUnavailable,
    ensure_cached,
    known_spec,
    record_error,
)

log = get_logger(__name__)

TIMEOUT_VARIABLE = "SMRITI_LOCAL_LOAD_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
#: Seconds between progress log lines during a download.
LOG_EVERY = 5.0


class PinnedModelEmbedder(Embedder):
    """The pinned model (``pinned.DEFAULT_SPEC``), loaded in the background.

    Built by ``LocalEmbedder.from_settings`` when ``SMRITI_LOCAL_MODEL`` is not set;
    not registered itself. ``set_fallback`` is called by the engine's embedder choice
    with the next embedder in line; ``loaded``, ``failure`` and ``wait`` tell how the
    load went.
    """

    name: ClassVar[str] = "local"
    priority: ClassVar[int] = 50
    description: ClassVar[str] = "pinned local sentence model, downloaded on first use"

    def __init__(
        self,
        spec: ModelSpec,
        root: Path,
        env: Mapping[str, str],
        *,
        threads: int | None = None,
        allow_fallback: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.spec = spec
        self.root = root
        self.allow_fallback = allow_fallback
        self.timeout = timeout
        self.failure: str | None = None
        self._env = dict(env)
        self._threads = threads
        self._fallback: Embedder | None = None
        self._model: Embedder | None = None
        self._ready = threading.Event()
        self._progress = _DownloadProgress(spec)
        self._thread = threading.Thread(target=self._load, name="smriti-model-load", daemon=True)
        self._thread.start()

    @classmethod
    def from_settings(cls, settings: object, *, explicit: bool = False) -> None:
        """Never chosen by name: ``LocalEmbedder.from_settings`` builds it."""
        return None

    def __repr__(self) -> str:
        state = "loaded" if self.loaded else ("failed" if self.failure else "loading")
        return f"PinnedModelEmbedder({self.spec.repo}@{self.spec.revision[:12]}, {state})"

    def set_fallback(self, embedder: Embedder | None) -> None:
        """The embedder to use when the model cannot be had (ignored for ``local``)."""
        self._fallback = embedder if self.allow_fallback else None

    @property
    def loaded(self) -> bool:
        """Whether the model itself (not a fallback) is serving."""
        return self._ready.is_set() and self._model is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the load to finish (either way); False on timeout."""
        return self._ready.wait(timeout)

    @property
    def model_id(self) -> str:
        """The pinned model's id; the fallback's once the model has failed to load."""
        active = self._active()
        return active.model_id if active is not None else self.spec.model_id

    @property
    def dims(self) -> int | None:
        """The pinned model's dimension; the fallback's once the model has failed."""
        active = self._active()
        return active.dims if active is not None else self.spec.dims

    @property
    def similarity_baseline(self) -> float:
        """The pinned model's baseline; the fallback's once the model has failed."""
        active = self._active()
        if active is not None:
            return active.similarity_baseline
        return baseline_of(self.spec.onnx_file.sha256[:12], self.spec.similarity_baseline)

    def for_model(self, model_id: str) -> Embedder | None:
        """The pinned model that makes ``model_id`` (an earlier default's, for a store
        embedded with it), loaded like this one but with no fallback: a store's vectors
        must never be mixed with another model's. None when no pinned model does."""
        spec = known_spec(model_id, self._env)
        if spec is None or spec == self.spec:
            return None
        return PinnedModelEmbedder(
            spec,
            self.root,
            self._env,
            threads=self._threads,
            allow_fallback=False,
            timeout=self.timeout,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed with the model, waiting for it to load; the fallback if it failed."""
        if not self._ready.wait(self.timeout):
            raise ProviderError(
                f"the local embedding model is still downloading or loading "
                f"({self._progress.summary()}); try again shortly, or set "
                f"{TIMEOUT_VARIABLE} to wait longer"
            )
        active = self._active()
        if active is None:
            raise ProviderError(
                f"the local embedding model is not available: {self.failure}; set "
                "SMRITI_LOCAL_MODEL to a directory with the model, or allow the download"
            )
        return active.embed(texts)

    def close(self) -> None:
        """Close the model (a download in progress finishes in its daemon thread)."""
        for embedder in (self._model, self._fallback):
            if embedder is not None:
                embedder.close()

    def _active(self) -> Embedder | None:
        if not self._ready.is_set():
            return None
        return self._model if self._model is not None else self._fallback

    def _load(self) -> None:
        from smriti_embedder_local.embedder import LocalEmbedder

        try:
            files = ensure_cached(self.spec, self.root, self._env, self._progress.report)
            model = LocalEmbedder(files, threads=self._threads)
            if model.model_id != self.spec.model_id:
                raise ModelUnavailable(
                    f"the model loaded as {model.model_id}, not {self.spec.model_id} as pinned"
                )
            self._model = model
            record_error(self.root, self.spec, None)
        except (ModelUnavailable, ConfigError, OSError) as exc:
            self._fail(str(exc))
        except Exception as exc:  # an unexpected failure must still release embed()
            self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            self._progress.close()
            self._ready.set()

    def _fail(self, reason: str) -> None:
        self.failure = reason
        record_error(self.root, self.spec, reason)
        if not self.allow_fallback:
            log.error("local embedding model unavailable", reason=reason)
            return
        log.warning(
            "semantic embedding model unavailable: using the built-in lexical embedder "
            "(it is tried again at the next start; then move this store to it with "
            "`smriti reembed`)",
            model=self.spec.repo,
            reason=reason,
        )


class _DownloadProgress:
    """Download progress: a line on a terminal's stderr, a log line every few seconds."""

    def __init__(self, spec: ModelSpec) -> None:
        self.total = spec.download_bytes
        self._done: dict[str, int] = {}
        self._line: Progress | None = None
        self._logged = 0.0
        self._lock = threading.Lock()

    def report(self, path: str, done: int, total: int) -> None:
        with self._lock:
            self._done[path] = done
            if self._line is None:
                self._line = Progress(
                    "downloading the embedding model (bytes)", self.total, stream=sys.stderr
                )
            self._line.done = sum(self._done.values())
            self._line.advance(0)
            now = time.monotonic()
            if now - self._logged >= LOG_EVERY or done >= total:
                self._logged = now
                log.info(
                    "embedding model download",
                    file=path,
                    megabytes=round(sum(self._done.values()) / 1e6, 1),
                    of_megabytes=round(self.total / 1e6, 1),
                )

    def summary(self) -> str:
        done = sum(self._done.values())
        return f"{done / 1e6:.1f} of {self.total / 1e6:.1f} MB downloaded"

    def close(self) -> None:
        with self._lock:
            if self._line is not None:
                self._line.close()
