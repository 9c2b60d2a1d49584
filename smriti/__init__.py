"""Smriti: graph-based, human-like memory for LLM agents, served over MCP.

The public framework API for plugin authors lives here.
"""

import pluggy

from smriti.backup import BackupProvider, SyncReport
from smriti.clustering import Clusterer, ClusterResult
from smriti.embedding import Embedder
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
from smriti.extraction import CueExtractor
from smriti.storage import EngramStats, StorageBackend, StoredMemory

hookimpl = pluggy.HookimplMarker("smriti")

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "BackupError",
    "BackupProvider",
    "ClusterResult",
    "Clusterer",
    "ConfigError",
    "CueExtractor",
    "DuplicatePluginError",
    "Embedder",
    "EngramStats",
    "InvalidInput",
    "NotFound",
    "PluginError",
    "ProviderError",
    "SmritiError",
    "StorageBackend",
    "StoreLockedError",
    "StoredMemory",
    "SyncReport",
    "UnknownBackendError",
    "hookimpl",
]
