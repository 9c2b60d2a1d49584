"""LadybugDB specifics: no extension ever, the plugin imports no driver, Kùzu files are
never opened as an empty store, and DB_TYPE=auto picks LadybugDB for a new store."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from smriti_backend_ladybug.backend import DB_FILE, LadybugBackend

from smriti.backend import BackendError
from smriti.config import Settings
from smriti.plugins import Registry, create_plugin_manager
from smriti.store_engine import backend_class
from smriti.testing import GraphBuilder

Factory = Callable[..., LadybugBackend]


def test_native_indexes_are_never_built(ladybug_factory: Factory) -> None:
    """Asked for Kùzu's indexes (SMRITI_WORKING_SET=off), it builds none: LadybugDB's
    extensions are not in its wheel, and nothing is ever installed or loaded."""
    backend = ladybug_factory("alice", native_indexes=True)
    assert backend.native_indexes is False
    build = GraphBuilder(8)
    for i in range(60):
        backend.add_memory(build.engram(i, content=f"memory number {i} about tea"), [], [])
    assert backend.ensure_indexes(8, 10) == []
    assert {
        name for name in backend.reader.index_names() if "fts" in name or "vec" in name
    } == set()
    assert [i for i, _ in backend.reader.text_search("memory number 7", 1)] == ["e00007"]
    assert backend.reader.vector_search(build.engram(7).embedding, 1)[0][0] == "e00007"


def test_the_plugin_module_does_not_import_the_driver() -> None:
    code = (
        "import sys, smriti_backend_ladybug.plugin as p; p.register_storage_backends(); "
        "sys.exit(1 if {'ladybug', 'kuzu'} & set(sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_a_kuzu_store_is_refused_not_emptied(tmp_path: Path) -> None:
    kuzu = tmp_path / "alice" / "memory.kuzu"
    kuzu.parent.mkdir()
    kuzu.write_bytes(b"a Kuzu database")
    backend = LadybugBackend("alice", tmp_path / "alice" / DB_FILE)
    with pytest.raises(BackendError, match="smriti migrate --to ladybug"):
        backend.open()
    assert sorted(p.name for p in kuzu.parent.iterdir()) == ["memory.kuzu"]


def test_auto_gives_a_new_store_ladybug(tmp_path: Path) -> None:
    from smriti_backend_ladybug import plugin

    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(plugin, name="smriti-backend-ladybug")
    settings = Settings.from_env({"STORAGE_LOCATION": str(tmp_path), "ACCESSING_USER": "al"})
    assert backend_class(Registry(pm), settings) is LadybugBackend
