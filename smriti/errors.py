"""Smriti's error hierarchy: every message says what went wrong and what to do."""


class SmritiError(Exception):
    """Base class of every error Smriti raises on purpose."""


class ConfigError(SmritiError):
    """A setting is missing or invalid; raised once, at startup."""


class InvalidInput(SmritiError, ValueError):
    """A tool argument or CLI value was rejected; nothing was stored or changed."""


class NotFound(SmritiError, LookupError):
    """The requested memory does not exist for this user."""


class PluginError(SmritiError):
    """A plugin could not be loaded or registered."""


class DuplicatePluginError(PluginError):
    """Two plugins registered a component with the same name."""


class UnknownBackendError(PluginError):
    """The configured backend, embedder, extractor, provider or clusterer is not installed."""


class BackendError(SmritiError):
    """The storage backend failed (connection, query, schema)."""


class StoreLockedError(BackendError):
    """Another process holds the store open."""


class StorageFullError(BackendError):
    """The disk holding the store is full: nothing was stored; free space and retry."""


class BackupError(SmritiError):
    """A backup provider could not push or restore."""


class ProviderError(SmritiError):
    """An embedding or LLM provider failed after its retries."""


class Cancelled(SmritiError):
    """A long operation stopped because the process that asked for it left (a killed
    ``smriti import`` or ``consolidate``); see the operation for what it kept."""
