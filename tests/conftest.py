"""Shared fixtures for core tests: real stores in temporary directories.

Core tests never load installed entry points: they build a plugin manager with the
built-ins and, for Kùzu, register its plugin module explicitly. The engine fixtures use
the backend named by ``SMRITI_TEST_BACKEND``: ``kuzu`` (the default, the product's
backend) or ``sqlite`` (the core's reference backend, which needs no plugin installed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from smriti.config import Settings
from smriti.engine import Engine
from smriti.plugins import create_plugin_manager

EngineFactory = Callable[..., Engine]

#: The ``DB_TYPE`` the engine fixtures use.
TEST_BACKEND = os.environ.get("SMRITI_TEST_BACKEND", "kuzu").strip().lower() or "kuzu"
if TEST_BACKEND not in ("kuzu", "ladybug", "sqlite"):
    raise pytest.UsageError(f"SMRITI_TEST_BACKEND={TEST_BACKEND!r}: use kuzu, ladybug or sqlite")


def plugin_manager():  # noqa: ANN201 - pluggy.PluginManager
    """Built-ins, plus the Kùzu or LadybugDB backend (registered like an entry point
    would be) when it is the test backend (``ladybug`` only in a process of its own,
    with SMRITI_TEST_ENGINE=ladybug: tests/test_engines_apart.py)."""
    pm, _ = create_plugin_manager(load_entry_points=False)
    if TEST_BACKEND == "kuzu":
        import smriti_backend_kuzu.plugin as kuzu_plugin

        pm.register(kuzu_plugin, name="smriti-backend-kuzu")
    elif TEST_BACKEND == "ladybug":
        import smriti_backend_ladybug.plugin as ladybug_plugin

        pm.register(ladybug_plugin, name="smriti-backend-ladybug")
    return pm


@pytest.fixture
def engine_factory(tmp_path: Path) -> Iterator[EngineFactory]:
    """``make(user="alice", **env)`` opens an Engine on a store under tmp_path."""
    opened: list[Engine] = []

    def make(user: str = "alice", **env: str) -> Engine:
        environ = {
            "STORAGE_LOCATION": str(tmp_path / "store"),
            "ACCESSING_USER": user,
            "DB_TYPE": TEST_BACKEND,
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
