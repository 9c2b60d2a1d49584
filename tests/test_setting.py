"""Plugin settings: declared with ``smriti.Setting``, validated at startup like the core's,
shown by doctor and the reference, and passed to a backend as options by the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from smriti import ConfigError, DuplicatePluginError, Setting, hookimpl
from smriti.backend import BackendOptions
from smriti.config import Settings
from smriti.default_plugins.sqlite.backend import SqliteBackend
from smriti.doctor.settings_reference import render
from smriti.doctor.settings_view import view
from smriti.engine.components import choose_backend
from smriti.index.indexed import IndexedBackend
from smriti.plugins import Registry, create_plugin_manager

COLOUR = Setting.choice("TEST_COLOUR", "red", ("red", "blue"), help="A colour.")
TOKEN = Setting.text("TEST_TOKEN", "", secret=True, help="A token.")
DEPTH = Setting.integer("TEST_DEPTH", 3, 1, 9, help="How deep.")


class RecordingBackend(SqliteBackend):
    """The reference backend, keeping the options the engine built it with."""

    name: ClassVar[str] = "recording"
    declared_settings = (COLOUR, TOKEN, DEPTH)
    seen: ClassVar[list[BackendOptions]] = []

    @classmethod
    def from_options(cls, options: BackendOptions) -> SqliteBackend:
        cls.seen.append(options)
        return super().from_options(options)


class Plugin:
    """A plugin registering the recording backend."""

    @staticmethod
    @hookimpl
    def register_storage_backends() -> list[type[Any]]:
        return [RecordingBackend]


def registry(*plugins: tuple[str, object]) -> Registry:
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    return Registry(pm, strict=True)


def test_a_setting_reads_its_default_its_value_or_one_clear_error() -> None:
    assert COLOUR.read({}) == "red" and COLOUR.read({"TEST_COLOUR": "  "}) == "red"
    assert COLOUR.read({"TEST_COLOUR": "BLUE"}) == "blue"
    assert DEPTH.read({"TEST_DEPTH": "7"}) == 7
    with pytest.raises(ConfigError) as caught:
        DEPTH.read({"TEST_DEPTH": "deep"})
    assert str(caught.value) == "TEST_DEPTH='deep' is not an integer (allowed: 1..9)"
    with pytest.raises(ConfigError, match=r"TEST_COLOUR='green' is invalid \(allowed: red, blue\)"):
        COLOUR.read({"TEST_COLOUR": "green"})
    assert (TOKEN.shown("s3cret"), TOKEN.shown(""), COLOUR.shown("red")) == ("set", "unset", "red")
    with pytest.raises(ValueError, match="UPPER_CASE"):
        Setting.text("lower_case")


def test_the_registry_collects_declarations_once_and_refuses_conflicts() -> None:
    found = registry(("recording-plugin", Plugin)).declared_settings()
    assert found == [("recording-plugin", COLOUR), ("recording-plugin", TOKEN),
                     ("recording-plugin", DEPTH)]  # fmt: skip

    class Other(SqliteBackend):
        name: ClassVar[str] = "other"
        declared_settings = (Setting.text("TEST_COLOUR", "green"),)

    class OtherPlugin:
        @staticmethod
        @hookimpl
        def register_storage_backends() -> list[type[Any]]:
            return [Other]

    class Sibling(SqliteBackend):  # another plugin built on the same library
        name: ClassVar[str] = "sibling"
        declared_settings = (DEPTH,)

    class SiblingPlugin:
        @staticmethod
        @hookimpl
        def register_storage_backends() -> list[type[Any]]:
            return [Sibling]

    shared = registry(("recording-plugin", Plugin), ("sibling-plugin", SiblingPlugin))
    assert ("recording-plugin, sibling-plugin", DEPTH) in shared.declared_settings()
    both = registry(("recording-plugin", Plugin), ("other-plugin", OtherPlugin))
    with pytest.raises(DuplicatePluginError, match="TEST_COLOUR.*'recording-plugin'.*'other"):
        both.declared_settings()
    Other.declared_settings = (Setting.text("DB_TYPE", "x"),)
    with pytest.raises(DuplicatePluginError, match="declares DB_TYPE, a core setting"):
        registry(("other-plugin", OtherPlugin)).declared_settings()


def test_the_engine_passes_the_backend_its_options(tmp_path: Path) -> None:
    RecordingBackend.seen.clear()
    env = {"STORAGE_LOCATION": str(tmp_path), "DB_TYPE": "recording", "TEST_DEPTH": "5"}
    reg = registry(("recording-plugin", Plugin))
    plain = choose_backend(reg, Settings.from_env(env), "alice")
    on = choose_backend(reg, Settings.from_env({**env, "SMRITI_WORKING_SET": "on"}), "bob")
    assert isinstance(plain, RecordingBackend) and isinstance(on, IndexedBackend)
    first, second = RecordingBackend.seen
    assert (first.user, first.user_dir, first.working_set) == ("alice", tmp_path / "alice", False)
    assert first.settings == {"TEST_COLOUR": "red", "TEST_TOKEN": "", "TEST_DEPTH": 5}
    assert (first.get(DEPTH), first.get(COLOUR)) == (5, "red")
    assert (second.user, second.working_set) == ("bob", True)


def test_a_bad_plugin_setting_stops_the_start_whichever_backend_is_chosen(
    tmp_path: Path,
) -> None:
    env = {"STORAGE_LOCATION": str(tmp_path), "DB_TYPE": "sqlite", "TEST_COLOUR": "green"}
    with pytest.raises(ConfigError, match="TEST_COLOUR='green' is invalid"):
        choose_backend(registry(("recording-plugin", Plugin)), Settings.from_env(env), "alice")


def test_an_override_naming_no_core_setting_is_a_plugin_variable() -> None:
    settings = Settings.from_env({}, test_colour="blue", test_depth=4)
    assert settings.env["TEST_COLOUR"] == "blue" and settings.env["TEST_DEPTH"] == "4"
    assert BackendOptions.from_settings(RecordingBackend, settings, "alice").get(DEPTH) == 4


def test_doctor_and_the_reference_show_plugin_settings() -> None:
    declared = [("recording-plugin", s) for s in (COLOUR, TOKEN, DEPTH)]
    environ = {"TEST_COLOUR": "green", "TEST_TOKEN": "tok-123456"}
    shown = view(environ, {}, declared)
    rows = {r.variable: r for r in shown.rows}
    assert (rows["TEST_COLOUR"].value, rows["TEST_COLOUR"].note) == ("green", "invalid")
    assert (rows["TEST_TOKEN"].value, rows["TEST_TOKEN"].origin) == ("set", "env")
    assert (rows["TEST_DEPTH"].value, rows["TEST_DEPTH"].origin) == ("3", "default")
    [bad] = [c for c in shown.checks if c.status == "fail"]
    assert bad.name == "setting TEST_COLOUR" and "unset it to use the default (red)" in bad.fix
    assert shown.settings is not None and "TEST_COLOUR" not in shown.settings.env
    text = render(declared)
    assert "### recording-plugin" in text
    assert "| `TEST_TOKEN` 🔒 | unset | any text | A token. |" in text
    assert "| `TEST_DEPTH` | `3` | 1..9 | How deep. |" in text


def test_a_plugin_probe_that_raises_is_a_fail_line_not_a_crash() -> None:
    from smriti.doctor.diagnose import _contained

    def broken_probe() -> Any:
        raise RuntimeError("no route to the server")

    check = _contained(broken_probe)()
    assert (check.name, check.status) == ("plugin probe", "fail")
    assert "broken_probe" in check.detail and "no route to the server" in check.detail
