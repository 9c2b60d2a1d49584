"""Every hook Smriti calls. Plugins implement them with ``@smriti.hookimpl``.

The ``register_*`` hooks are registry hooks: they are called once, when the engine
builds its component registry, take no arguments, and return a list of classes.
Returning None (or an empty list) means "this plugin registers none of these". Names
must be unique across plugins: a duplicate is an error naming both plugins.

A component declares the settings it reads on its class (``declared_settings``, a
tuple of ``smriti.Setting``); ``doctor_probes`` lets a plugin check the servers its
components talk to, so ``smriti doctor`` names no plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from collections.abc import Callable

    from smriti.backend import StorageBackend
    from smriti.backup import BackupProvider
    from smriti.clustering import Clusterer
    from smriti.config import Settings
    from smriti.doctor.checks import Check
    from smriti.embedding import Embedder
    from smriti.extraction import CueExtractor

hookspec = pluggy.HookspecMarker("smriti")


@hookspec
def register_storage_backends() -> list[type[StorageBackend]] | None:
    """Storage backend classes this plugin provides.

    Called when the registry is built (at startup and by ``smriti plugins``). Each
    class's ``name`` (and ``aliases``) are ``DB_TYPE`` values.
    """


@hookspec
def register_embedders() -> list[type[Embedder]] | None:
    """Embedder classes this plugin provides, selected by ``SMRITI_EMBEDDER``.

    Called when the registry is built. With ``auto`` the configured class with the
    highest ``priority`` is used.
    """


@hookspec
def register_cue_extractors() -> list[type[CueExtractor]] | None:
    """Cue extractor classes this plugin provides, selected by ``SMRITI_CUE_EXTRACTOR``.

    Called when the registry is built. With ``auto`` the configured class with the
    highest ``priority`` is used.
    """


@hookspec
def register_backup_providers() -> list[type[BackupProvider]] | None:
    """Backup provider classes this plugin provides, selected by ``BACKUP_TYPE``.

    Called when the registry is built. Each class's ``name`` and ``aliases`` are
    ``BACKUP_TYPE`` values.
    """


@hookspec
def register_clusterers() -> list[type[Clusterer]] | None:
    """Clusterer classes this plugin provides; consolidation uses the highest priority.

    Called when the registry is built.
    """


@hookspec
def doctor_probes(
    settings: Settings, backend: StorageBackend | None, backup: BackupProvider | None
) -> list[Callable[[], Check]] | None:
    """Probes ``smriti doctor`` runs for the configured components: does each server
    they use answer?

    Called once per ``smriti doctor`` run, after the components are chosen.
    ``backend`` is the ``DB_TYPE`` backend for the user, built but never opened (not
    behind a working set: test it with ``isinstance`` against your own classes), or
    None when it could not be built; ``backup`` is the ``BACKUP_TYPE`` provider, or
    None when there is none (``none``) or it could not be built. ``settings`` are the
    validated core settings (a plugin's own values are on its components).
    Return callables that each take no argument and return one ``smriti.DoctorCheck``
    (``ok``, ``warn`` or ``fail`` with a fix naming the setting to change); they run in
    parallel, should finish in a few seconds and must not raise. Return None when none
    of the components is yours.
    """
