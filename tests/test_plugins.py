"""Plugin loading through real entry points of throw-away distributions on sys.path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from smriti import hookimpl
from smriti.backend import StorageBackend
from smriti.errors import DuplicatePluginError, PluginError, UnknownBackendError
from smriti.plugins import DEFAULT_PLUGINS, Registry, create_plugin_manager

GOOD = """
from smriti import hookimpl
from smriti.default_plugins.noop_backup import NoBackup

class Tape(NoBackup):
    name = "tape"
    aliases = ()

@hookimpl
def register_backup_providers():
    return [Tape]
"""
BROKEN = "raise RuntimeError('native library missing')\n"
MISSPELLED = """
from smriti import hookimpl

@hookimpl
def register_storage_backend():  # singular: not a hook
    return []
"""


def make_dist(root: Path, dist: str, module: str, source: str) -> None:
    """A minimal installed distribution with one ``smriti`` entry point."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[smriti]\n{dist} = {module}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    make_dist(tmp_path, "smriti-backup-tape", "smriti_tape_plugin", GOOD)
    make_dist(tmp_path, "smriti-broken", "smriti_broken_plugin", BROKEN)
    make_dist(tmp_path, "smriti-misspelled", "smriti_misspelled_plugin", MISSPELLED)
    return tmp_path


ONLY_FAKES = {"SMRITI_LOAD_PLUGINS": "smriti-backup-tape,smriti-broken,smriti-misspelled"}


def test_builtins_are_registered_as_plugins() -> None:
    pm, report = create_plugin_manager(load_entry_points=False)
    assert [p.name for p in report.loaded] == list(DEFAULT_PLUGINS)
    registry = Registry(pm)
    assert {"lexical", "openai"} <= set(registry.classes["embedder"])
    assert {"heuristic", "openai"} <= set(registry.classes["extractor"])
    assert "leiden" in registry.classes["clusterer"]
    assert "none" in registry.classes["backup"]


def test_broken_plugins_are_reported_not_fatal(site: Path) -> None:
    pm, report = create_plugin_manager(environ=ONLY_FAKES)
    loaded = {p.name: p for p in report.loaded}
    assert loaded["smriti-backup-tape"].distribution == "smriti-backup-tape"
    assert loaded["smriti-backup-tape"].version == "1.2.3"
    assert "native library missing" in report.failures["smriti-broken"]
    assert "register_storage_backend" in report.failures["smriti-misspelled"]
    assert not pm.has_plugin("smriti-misspelled")
    assert "tape" in Registry(pm).classes["backup"]


def test_strict_mode_reraises(site: Path) -> None:
    with pytest.raises(PluginError, match="smriti-broken"):
        create_plugin_manager(environ={**ONLY_FAKES, "SMRITI_STRICT_PLUGINS": "1"})


def test_load_and_disable_select_plugins(site: Path) -> None:
    _, report = create_plugin_manager(environ={"SMRITI_LOAD_PLUGINS": "smriti-backup-tape"})
    names = {p.name for p in report.loaded}
    assert "smriti-backup-tape" in names and not report.failures
    _, report = create_plugin_manager(
        environ={**ONLY_FAKES, "SMRITI_DISABLE_PLUGINS": "smriti-broken"}
    )
    assert "smriti-broken" not in report.failures


def test_duplicate_component_names_name_both_plugins() -> None:
    pm, _ = create_plugin_manager(load_entry_points=False)

    class Dup:
        @hookimpl
        def register_backup_providers(self) -> list[type]:
            from smriti.default_plugins.noop_backup import NoBackup

            class Other(NoBackup):
                name = "none"
                aliases = ()

            return [Other]

    pm.register(Dup(), name="dup-plugin")
    with pytest.raises(DuplicatePluginError) as info:
        Registry(pm)
    assert "dup-plugin" in str(info.value) and "noop_backup" in str(info.value)


def test_unknown_backend_says_what_is_installed_and_what_to_install() -> None:
    pm, _ = create_plugin_manager(load_entry_points=False)
    with pytest.raises(UnknownBackendError) as info:
        Registry(pm).get("backend", "neo4j", "DB_TYPE")
    message = str(info.value)
    assert "DB_TYPE='neo4j'" in message and "installed: sqlite)" in message
    assert "pip install 'smriti-server[neo4j]'" in message


def test_third_party_backend_registers_like_builtins() -> None:
    pm, _ = create_plugin_manager(load_entry_points=False)

    class Mine(StorageBackend):  # abstract: only the registry sees it
        name = "mine"
        aliases = ("my",)

    class Plugin:
        @hookimpl
        def register_storage_backends(self) -> list[type[StorageBackend]]:
            return [Mine]

    pm.register(Plugin(), name="mine-plugin")
    registry = Registry(pm)
    assert registry.get("backend", "my", "DB_TYPE") is Mine
    assert registry.owners[("backend", "mine")] == "mine-plugin"


def test_registration_hook_that_raises_is_reported_not_fatal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pm, _ = create_plugin_manager(load_entry_points=False)

    class Lazy:
        @hookimpl
        def register_storage_backends(self) -> list[type[StorageBackend]]:
            raise ModuleNotFoundError("No module named 'fancydb_driver'")

    pm.register(Lazy(), name="smriti-backend-fancy")
    registry = Registry(pm, strict=False)
    assert "fancydb_driver" in registry.failures["smriti-backend-fancy"]
    assert "lexical" in registry.classes["embedder"]
    assert registry.components("smriti.default_plugins.lexical_embedder") == ["embedder:lexical"]
    with pytest.raises(PluginError, match="smriti-backend-fancy"):
        Registry(pm, strict=True)
