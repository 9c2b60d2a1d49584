"""Checks of the components the settings select: plugins, backend, embedder, extractor,
backup. Each says what ``Engine.from_settings`` would use, without opening the store,
loading a model or calling a server (the servers are probed separately, in parallel).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smriti.config import Settings
from smriti.doctor.checks import Check, fail, ok, warn
from smriti.plugins import PluginReport, Registry
from smriti.store_engine import backend_class

#: Why the local embedder may be missing: ``smriti-server`` leaves it out where ONNX
#: Runtime has no wheel (Intel macOS on Python 3.14).
NO_LOCAL_EMBEDDER = (
    "the local sentence embedder is not installed (smriti-server leaves it out where ONNX "
    "Runtime has no wheel, such as Intel macOS on Python 3.14): use an embedding API, or "
    "Python 3.13 for local embeddings"
)
LEXICAL_TIP = (
    "for semantic recall set LLM_API_KEY or EMBEDDING_BASE_URL, or install the local embedder"
)


def plugin_checks(report: PluginReport, registry: Registry) -> list[Check]:
    """One ``warn`` per plugin that failed to load or register, else one ``ok``."""
    failures = {**report.failures, **registry.failures}
    if not failures:
        return [ok("plugins", f"{len(report.loaded)} loaded, none failed")]
    return [
        warn(
            f"plugin {name}",
            f"failed to load: {error}",
            f"reinstall it, or skip it with SMRITI_DISABLE_PLUGINS={name}",
        )
        for name, error in sorted(failures.items())
    ]


def owner_text(registry: Registry, report: PluginReport, kind: str, name: str) -> str:
    """``plugin smriti-backend-kuzu 0.1.0`` for the plugin that registered ``name``."""
    owner = registry.owners.get((kind, name), "?")
    versions = {info.name: info.version for info in report.loaded}
    if owner.startswith("smriti.default_plugins."):
        return "built-in"
    return f"plugin {owner} {versions.get(owner, '')}".strip()


def backend_check(registry: Registry, report: PluginReport, settings: Settings) -> Check:
    """The ``DB_TYPE`` backend, installed or not (UnknownBackendError names the fix)."""
    cls = backend_class(registry, settings)
    return ok("backend", f"{cls.name} ({owner_text(registry, report, 'backend', cls.name)})")


def store_path(backend: Any) -> Path | None:
    """The database file of an embedded backend (``path``), None for servers."""
    path = getattr(backend, "path", None)
    return path if isinstance(path, Path) else None


def embedder_check(registry: Registry, settings: Settings) -> tuple[Check, str]:
    """What ``choose_embedder`` would pick, and its name; never loads a model."""
    if settings.embedder != "auto":
        cls = registry.get("embedder", settings.embedder, "SMRITI_EMBEDDER")
        found = _describe(cls, settings, explicit=True)
        return found or ok("embedder", cls.name), cls.name
    for cls in registry.unique("embedder"):
        found = _describe(cls, settings, explicit=False)
        if found is not None:
            detail = f"auto: {found.detail}"
            if cls.name == "lexical" and "local" not in registry.classes["embedder"]:
                detail += f"; {NO_LOCAL_EMBEDDER}"
            return Check("embedder", found.status, detail, found.fix), cls.name
    return fail("embedder", "no embedder is available", "reinstall smriti"), ""


def _describe(cls: type[Any], settings: Settings, *, explicit: bool) -> Check | None:
    """A Check for the embedder ``cls``; None when ``choose_embedder`` would pass it over."""
    report = getattr(cls, "doctor_check", None)  # the embedder's own report, if any
    own = report(settings, explicit=explicit) if report is not None else None
    if own is not None:
        return own
    if not cls.__module__.startswith("smriti."):
        return ok("embedder", f"{cls.name} ({cls.__module__}; not started by doctor)")
    instance = cls.from_settings(settings, explicit=explicit)
    if instance is None:
        return None
    try:
        if cls.name == "lexical":
            return ok("embedder", "lexical (built-in, no model, no API)", LEXICAL_TIP)
        return ok("embedder", _api_embedder_text(cls.name, settings))
    finally:
        instance.close()


def _api_embedder_text(name: str, settings: Settings) -> str:
    from smriti.doctor.probes import redact_url

    dims = settings.embedding_dims or "learned from the first vector"
    url = redact_url(settings.effective_embedding_base_url)
    return f"{name}: {settings.embedding_model} at {url} (dims: {dims})"


def extractor_check(registry: Registry, settings: Settings) -> tuple[Check, str]:
    """The cue extractor ``choose_extractor`` picks, and its (primary) name."""
    from smriti.engine.components import FallbackExtractor, choose_extractor

    extractor = choose_extractor(registry, settings)
    try:
        if isinstance(extractor, FallbackExtractor):
            name = extractor.primary.name
            model = f": {settings.llm_model}" if name == "openai" else ""
            return ok("cue extractor", f"{name}{model} (heuristic fallback on errors)"), name
        tip = "set LLM_API_KEY (or LLM_BASE_URL for a local server) for LLM extraction"
        return ok("cue extractor", f"{extractor.name} (built-in)", tip), extractor.name
    finally:
        extractor.close()


def backup_check(registry: Registry, settings: Settings) -> tuple[Check, Any]:
    """The backup provider (constructed, which validates its settings; nothing is run)."""
    if settings.backup_type == "none":
        return ok("backup", "none", "set BACKUP_TYPE=git or s3 to keep a copy elsewhere"), None
    cls = registry.get("backup", settings.backup_type, "BACKUP_TYPE")
    provider = cls(settings, settings.accessing_user)
    every = settings.backup_sync_interval
    when = f"pushed every {every} s and at shutdown" if every else "pushed at shutdown and on sync"
    return ok("backup", f"{cls.name}: {when}"), provider
