"""The settings in effect: each variable's value (secrets redacted) and where it came from.

Core settings (``smriti.config.Settings``) and the settings installed plugins declare
(``smriti.Setting``) are shown alike. Origins follow the precedence of
``Settings.from_env``: a command-line flag (an override that is not None) wins over a
non-blank environment variable, which wins over the default. Every variable is
validated on its own, so one report names all the invalid ones, and the rest of the
doctor still runs with defaults in their place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from smriti.config import Settings, core_settings
from smriti.doctor.checks import Check, fail, ok
from smriti.doctor.probes import redact_url
from smriti.errors import ConfigError
from smriti.setting import Setting

#: The global CLI flag of each setting that has one.
FLAGS: dict[str, str] = {
    "accessing_user": "--user",
    "storage_location": "--storage",
    "db_type": "--db-type",
    "log_level": "--log-level",
}
#: Settings whose empty value falls back to another one.
FALLBACKS: dict[str, str] = {
    "embedding_api_key": "LLM_API_KEY",
    "embedding_base_url": "LLM_BASE_URL",
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One setting as doctor and the reference see it: a core ``Settings`` field
    (``field`` names it) or a plugin's declaration (``plugin`` names the plugin)."""

    setting: Setting[Any]
    field: str = ""
    plugin: str = ""

    @property
    def var(self) -> str:
        """The environment variable."""
        return self.setting.env


def entries(declared: Iterable[tuple[str, Setting[Any]]] = ()) -> list[Entry]:
    """The core settings in declaration order, then ``declared`` (plugin, setting) pairs."""
    core = [Entry(setting, name) for name, setting in core_settings()]
    return core + [Entry(setting, "", plugin) for plugin, setting in declared]


@dataclass(frozen=True, slots=True)
class SettingRow:
    """One setting as doctor shows it: ``origin`` is ``flag --x``, ``env`` or ``default``."""

    variable: str
    value: str
    origin: str
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        """The row as a JSON-ready mapping."""
        return {
            "name": self.variable,
            "value": self.value,
            "origin": self.origin,
            "note": self.note,
        }


@dataclass(slots=True)
class SettingsView:
    """Validated settings (None when they cannot be built), their rows and checks."""

    settings: Settings | None
    rows: list[SettingRow]
    checks: list[Check]


def origin(e: Entry, environ: Mapping[str, str], overrides: Mapping[str, Any]) -> str:
    """``flag --x``, ``env`` or ``default`` for one setting."""
    if e.field and overrides.get(e.field) is not None:
        return f"flag {FLAGS.get(e.field, '')}".strip()
    if environ.get(e.var, "").strip():
        return "env"
    return "default"


def view(
    environ: Mapping[str, str],
    overrides: Mapping[str, Any],
    declared: Iterable[tuple[str, Setting[Any]]] = (),
) -> SettingsView:
    """Validate every setting (the core's and the ``declared`` plugin settings), build
    Settings from the valid ones, and describe them."""
    shown = entries(declared)
    bad = {e.var: message for e in shown if (message := _invalid(e, environ, overrides))}
    checks = [_bad_check(e, bad[e.var]) for e in shown if e.var in bad]
    settings = _build(environ, overrides, shown, bad, checks)
    rows = [_row(e, settings, environ, overrides, e.var in bad) for e in shown]
    if not checks:
        checks.append(ok("settings", f"{len(rows)} settings valid"))
    return SettingsView(settings, rows, checks)


def _given(e: Entry, environ: Mapping[str, str], overrides: Mapping[str, Any]) -> Any:
    if e.field and overrides.get(e.field) is not None:
        return overrides[e.field]
    raw = environ.get(e.var, "")
    return raw if raw.strip() else None


def _invalid(e: Entry, environ: Mapping[str, str], overrides: Mapping[str, Any]) -> str:
    given = _given(e, environ, overrides)
    if not isinstance(given, str):
        return ""
    try:
        e.setting.parse(e.var, given)
    except ConfigError as exc:
        return str(exc)
    return ""


def _bad_check(e: Entry, message: str) -> Check:
    shown = message if not e.setting.secret else f"{e.var} is invalid"
    return fail(
        f"setting {e.var}",
        shown,
        f"correct {e.var} or unset it to use the default ({default_text(e)}); see docs/settings.md",
    )


def _build(
    environ: Mapping[str, str],
    overrides: Mapping[str, Any],
    shown: list[Entry],
    bad: Mapping[str, str],
    checks: list[Check],
) -> Settings | None:
    env = {k: v for k, v in environ.items() if k not in bad}
    kept = {e.field: overrides[e.field] for e in shown if e.field in overrides and e.var not in bad}
    try:
        return Settings.from_env(env, **kept)
    except ConfigError as exc:  # a rule across settings, or one not checked field by field
        checks.append(fail("settings", str(exc), "correct the variable it names"))
        return None


def _row(
    e: Entry,
    settings: Settings | None,
    environ: Mapping[str, str],
    overrides: Mapping[str, Any],
    invalid: bool,
) -> SettingRow:
    where = origin(e, environ, overrides)
    if invalid or settings is None:
        value = _given(e, environ, overrides)
        return SettingRow(e.var, _shown(e, value), where, "invalid" if invalid else "")
    value = getattr(settings, e.field) if e.field else e.setting.read(settings.env)
    note = ""
    if e.field in FALLBACKS and not value:
        note = f"falls back to {FALLBACKS[e.field]}"
    return SettingRow(e.var, _shown(e, value), where, note)


def _shown(e: Entry, value: Any) -> str:
    if e.setting.secret:
        return "set" if value else "unset"
    if value is None or value == "":
        return "unset"
    return redact_url(str(value))  # a token in a URL's userinfo is a secret too


def default_text(e: Entry) -> str:
    """The default as a fix line names it (``unset`` for an empty one)."""
    value = e.setting.default
    return "unset" if value in (None, "") else str(value)
