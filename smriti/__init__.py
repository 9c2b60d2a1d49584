"""Smriti: graph-based, human-like memory for LLM agents, served over MCP.

The public framework API for plugin authors lives here.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

import pluggy

from smriti.errors import (
    BackendError,
    BackupError,
    ConfigError,
    DuplicatePluginError,
    InvalidInput,
    NotFound,
    PluginError,
    ProviderError,
    SmritiError,
    StoreLockedError,
    UnknownBackendError,
)
from smriti.setting import Setting

if TYPE_CHECKING:
    from smriti.backend import EngramStats, StorageBackend, StoredMemory
    from smriti.backup import BackupProvider, Fetched, SnapshotConflict, SyncReport
    from smriti.clustering import Clusterer, ClusterResult
    from smriti.config import Settings
    from smriti.doctor.checks import Check as DoctorCheck
    from smriti.embedding import Embedder
    from smriti.extraction import CueExtractor
    from smriti.logs import get_logger
    from smriti.model import CUE_TYPES, MEMORY_TYPES, CueRef, Extraction
    from smriti.portable.scrub import scrub
    from smriti.progress import Progress

# The base classes pull in numpy; import them on first use so `smriti --help` and
# plugin entry modules stay fast.
_LAZY = {
    "BackupProvider": "smriti.backup",
    "SyncReport": "smriti.backup",
    "Fetched": "smriti.backup",
    "SnapshotConflict": "smriti.backup",
    # A backup provider scrubs purged memories out of the snapshots it keeps.
    "scrub": "smriti.portable.scrub",
    "Clusterer": "smriti.clustering",
    "ClusterResult": "smriti.clustering",
    "Embedder": "smriti.embedding",
    "CueExtractor": "smriti.extraction",
    "CueRef": "smriti.model",
    "Extraction": "smriti.model",
    "CUE_TYPES": "smriti.model",
    "MEMORY_TYPES": "smriti.model",
    "get_logger": "smriti.logs",
    "Progress": "smriti.progress",
    "DoctorCheck": "smriti.doctor.checks",
    # What a component's ``from_settings`` receives (the core settings, validated).
    "Settings": "smriti.config",
    "EngramStats": "smriti.backend",
    "StorageBackend": "smriti.backend",
    "StoredMemory": "smriti.backend",
}


#: Public names whose class has another name in its module.
_RENAMED = {"DoctorCheck": "Check"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), _RENAMED.get(name, name))
    raise AttributeError(f"module 'smriti' has no attribute {name!r}")


hookimpl = pluggy.HookimplMarker("smriti")


def _installed_version() -> str:
    # The version is set once, in the root pyproject.toml (see docs/releasing.md); the
    # installed distribution's metadata carries it, so nothing here can fall out of step.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("smriti-core")
    except PackageNotFoundError:  # a source tree on sys.path without an install
        return "0+unknown"


__version__ = _installed_version()

__all__ = [
    "CUE_TYPES",
    "MEMORY_TYPES",
    "BackendError",
    "BackupError",
    "BackupProvider",
    "ClusterResult",
    "Clusterer",
    "ConfigError",
    "CueExtractor",
    "CueRef",
    "DoctorCheck",
    "DuplicatePluginError",
    "Embedder",
    "EngramStats",
    "Extraction",
    "Fetched",
    "InvalidInput",
    "NotFound",
    "PluginError",
    "Progress",
    "ProviderError",
    "Setting",
    "Settings",
    "SmritiError",
    "SnapshotConflict",
    "StorageBackend",
    "StoreLockedError",
    "StoredMemory",
    "SyncReport",
    "UnknownBackendError",
    "get_logger",
    "hookimpl",
    "scrub",
]
