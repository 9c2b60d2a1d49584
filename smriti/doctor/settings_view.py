"""The settings in effect: each variable's value (secrets redacted) and where it came from.

Origins follow the precedence of ``Settings.from_env``: a command-line flag (an
override that is not None) wins over a non-blank environment variable, which wins over
the default. Every variable is validated on its own, so one report names all the
invalid ones, and the rest of the doctor still runs with defaults in their place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

from smriti.config import SECRET_FIELDS, Settings
from smriti.doctor.checks import Check, fail, ok
from smriti.doctor.probes import redact_url
from smriti.errors import ConfigError

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


def setting_fields() -> list[Field[Any]]:
    """The Settings fields read from an environment variable, in declaration order."""
    return [f for f in fields(Settings) if "env" in f.metadata]


def origin(f: Field[Any], environ: Mapping[str, str], overrides: Mapping[str, Any]) -> str:
    """``flag --x``, ``env`` or ``default`` for one setting."""
    if overrides.get(f.name) is not None:
        return f"flag {FLAGS.get(f.name, '')}".strip()
    if environ.get(f.metadata["env"], "").strip():
        return "env"
    return "default"


def view(environ: Mapping[str, str], overrides: Mapping[str, Any]) -> SettingsView:
    """Validate every setting, build Settings from the valid ones, and describe them."""
    bad: dict[str, str] = {}
    for f in setting_fields():
        message = _invalid(f, environ, overrides)
        if message:
            bad[f.name] = message
    checks = [_bad_check(f, bad[f.name]) for f in setting_fields() if f.name in bad]
    settings = _build(environ, overrides, bad, checks)
    rows = [_row(f, settings, environ, overrides, f.name in bad) for f in setting_fields()]
    if not checks:
        checks.append(ok("settings", f"{len(rows)} settings valid"))
    return SettingsView(settings, rows, checks)


def _given(f: Field[Any], environ: Mapping[str, str], overrides: Mapping[str, Any]) -> Any:
    if overrides.get(f.name) is not None:
        return overrides[f.name]
    raw = environ.get(f.metadata["env"], "")
    return raw if raw.strip() else None


def _invalid(f: Field[Any], environ: Mapping[str, str], overrides: Mapping[str, Any]) -> str:
    given = _given(f, environ, overrides)
    if not isinstance(given, str):
        return ""
    try:
        f.metadata["parse"](f.metadata["env"], given)
    except ConfigError as exc:
        return str(exc)
    return ""


def _bad_check(f: Field[Any], message: str) -> Check:
    var = f.metadata["env"]
    shown = message if f.name not in SECRET_FIELDS else f"{var} is invalid"
    return fail(
        f"setting {var}",
        shown,
        f"correct {var} or unset it to use the default ({_default(f)}); see docs/settings.md",
    )


def _build(
    environ: Mapping[str, str],
    overrides: Mapping[str, Any],
    bad: Mapping[str, str],
    checks: list[Check],
) -> Settings | None:
    skip = {f.metadata["env"] for f in setting_fields() if f.name in bad}
    env = {k: v for k, v in environ.items() if k not in skip}
    kept = {k: v for k, v in overrides.items() if k not in bad}
    try:
        return Settings.from_env(env, **kept)
    except ConfigError as exc:  # a rule across settings, or one not checked field by field
        checks.append(fail("settings", str(exc), "correct the variable it names"))
        return None


def _row(
    f: Field[Any],
    settings: Settings | None,
    environ: Mapping[str, str],
    overrides: Mapping[str, Any],
    invalid: bool,
) -> SettingRow:
    var = f.metadata["env"]
    where = origin(f, environ, overrides)
    if invalid:
        return SettingRow(var, _shown(f, _given(f, environ, overrides)), where, "invalid")
    value = getattr(settings, f.name) if settings is not None else _given(f, environ, overrides)
    note = ""
    if f.name in FALLBACKS and not value:
        note = f"falls back to {FALLBACKS[f.name]}"
    return SettingRow(var, _shown(f, value), where, note)


def _shown(f: Field[Any], value: Any) -> str:
    if f.name in SECRET_FIELDS:
        return "set" if value else "unset"
    if value is None or value == "":
        return "unset"
    return redact_url(str(value))  # a token in a URL's userinfo is a secret too


def _default(f: Field[Any]) -> str:
    value = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
    return "unset" if value in (None, "") else str(value)
