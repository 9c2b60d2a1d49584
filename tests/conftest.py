"""Shared fixtures for core tests: real Kùzu stores in temporary directories.

Core tests never load installed entry points: they build a plugin manager with the
built-ins and register the Kùzu plugin module explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from smriti.config import Settings
from smriti.engine import Engine
from smriti.plugins import create_plugin_manager

EngineFactory = Callable[..., Engine]


def plugin_manager():  # noqa: ANN201 - pluggy.PluginManager
    """Built-ins plus the Kùzu backend, registered like an entry point would be."""
    import smriti_backend_kuzu.plugin as kuzu_plugin

    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(kuzu_plugin, name="smriti-backend-kuzu")
    return pm


@pytest.fixture
def engine_factory(tmp_path: Path) -> Iterator[EngineFactory]:
    """``make(user="alice", **env)`` opens an Engine on a Kùzu store under tmp_path."""
    opened: list[Engine] = []

    def make(user: str = "alice", **env: str) -> Engine:
        environ = {
            "STORAGE_LOCATION": str(tmp_path / "store"),
            "ACCESSING_USER": user,
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
            **env,
        }
        engine = Engine.from_settings(Settings.from_env(environ), pm=plugin_manager())
        engine.open()
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


@pytest.fixture
def engine(engine_factory: EngineFactory) -> Engine:
    """An open engine for user alice with zero configuration (no API keys)."""
    return engine_factory()
