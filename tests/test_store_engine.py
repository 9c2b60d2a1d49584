"""``DB_TYPE=auto``: a store keeps the engine that made it, a new store gets the
preferred engine installed, and a moved store opens with the engine it was moved to."""

from __future__ import annotations

from pathlib import Path

import pytest

from smriti import hookimpl
from smriti.backend import StorageBackend
from smriti.config import Settings
from smriti.default_plugins.sqlite.backend import SqliteBackend
from smriti.errors import ConfigError, UnknownBackendError
from smriti.plugins import Registry, create_plugin_manager
from smriti.store_engine import ENGINE_RECORD, backend_class, write_engine_record


class Old(SqliteBackend):
    name = "old-engine"
    aliases = ()
    store_files = ("memory.old",)
    preference = 10


class New(SqliteBackend):
    name = "new-engine"
    aliases = ()
    store_files = ("memory.new",)
    preference = 20


def _registry(*classes: type[StorageBackend]) -> Registry:
    pm, _ = create_plugin_manager(load_entry_points=False)

    class Plugin:
        @hookimpl
        def register_storage_backends(self) -> list[type[StorageBackend]]:
            return list(classes)

    pm.register(Plugin(), name="engines")
    return Registry(pm)


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"STORAGE_LOCATION": str(tmp_path), "ACCESSING_USER": "alice", **env})


def test_a_new_store_gets_the_preferred_engine(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings.db_type == "auto"
    assert backend_class(_registry(Old, New), settings) is New
    assert backend_class(_registry(Old), settings) is Old  # the only one installed


def test_an_existing_store_keeps_its_engine(tmp_path: Path) -> None:
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "memory.old").write_bytes(b"")
    assert backend_class(_registry(Old, New), _settings(tmp_path)) is Old
    # another user's directory is not looked at
    assert backend_class(_registry(Old, New), _settings(tmp_path), "bob") is New


def test_an_explicit_db_type_wins(tmp_path: Path) -> None:
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "memory.new").write_bytes(b"")
    settings = _settings(tmp_path, DB_TYPE="old-engine")
    assert backend_class(_registry(Old, New), settings) is Old


def test_a_moved_store_opens_with_the_recorded_engine(tmp_path: Path) -> None:
    user_dir = tmp_path / "alice"
    user_dir.mkdir()
    (user_dir / "memory.new").write_bytes(b"")
    (user_dir / "memory.old").write_bytes(b"")  # the old files stay after a move
    write_engine_record(user_dir, "old-engine")
    assert backend_class(_registry(Old, New), _settings(tmp_path)) is Old
    write_engine_record(user_dir, "new-engine")
    assert backend_class(_registry(Old, New), _settings(tmp_path)) is New
    with pytest.raises(UnknownBackendError, match="new-engine"):
        backend_class(_registry(Old), _settings(tmp_path))


def test_a_cut_short_move_leaves_the_store_on_its_old_engine(tmp_path: Path) -> None:
    user_dir = tmp_path / "alice"
    user_dir.mkdir()
    (user_dir / "memory.old").write_bytes(b"")
    (user_dir / "memory.new").write_bytes(b"")  # renamed in, the record not yet written
    (user_dir / "migrate-new-engine.moving").write_text("")
    assert backend_class(_registry(Old, New), _settings(tmp_path)) is Old


def test_a_damaged_record_is_an_error_naming_the_fix(tmp_path: Path) -> None:
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / ENGINE_RECORD).write_text("{not json")
    with pytest.raises(ConfigError, match="delete it"):
        backend_class(_registry(Old, New), _settings(tmp_path))


def test_no_engine_to_choose_says_what_to_install(tmp_path: Path) -> None:
    """Backends without a preference (the reference SQLite one, servers) are never
    chosen automatically."""
    with pytest.raises(UnknownBackendError, match="pip install smriti-server"):
        backend_class(_registry(), _settings(tmp_path))
