"""``Setting``: one environment variable a component reads, declared where it is read.

The core's own settings are fields of ``smriti.config.Settings``. A plugin declares its
settings on the component classes that read them (``declared_settings``, a class
attribute of ``StorageBackend``, ``Embedder``, ``BackupProvider`` and the others); the
core validates every installed plugin's settings when it starts, lists them in
``smriti doctor`` and in the settings reference, and passes a backend the values of its
own (``BackendOptions.settings``). The core never names a plugin's variable.

A declaration says the variable, its default, how a value is parsed and checked (one
``ConfigError`` line naming the variable and what it accepts), whether it is a secret
(never shown: ``set``/``unset``) and what it means::

    NEO4J_URI = Setting.url("NEO4J_URI", "bolt://localhost:7687", help="Bolt URI of the server.")
    NEO4J_ISOLATION = Setting.choice("NEO4J_ISOLATION", "tenant", ("tenant", "database"))
    NEO4J_PASSWORD = Setting.text("NEO4J_PASSWORD", "", secret=True, help="Neo4j password.")

    class Neo4jBackend(StorageBackend):
        declared_settings = (NEO4J_URI, NEO4J_ISOLATION, NEO4J_PASSWORD)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from smriti.errors import ConfigError

T = TypeVar("T")

#: A parser: ``parse(variable, raw)`` returns the value or raises ConfigError naming
#: the variable and what it accepts, on one line.
Parser = Callable[[str, str], T]
#: Environment variable names: upper case letters, digits and ``_``.
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,127}")


def text(name: str, raw: str) -> str:
    """Any text, stripped of surrounding spaces."""
    return raw.strip()


def integer(lo: int, hi: int) -> Parser[int]:
    """A parser of whole numbers from ``lo`` to ``hi``."""

    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not an integer (allowed: {lo}..{hi})") from None
        if not lo <= value <= hi:
            raise ConfigError(f"{name}={value} is out of range (allowed: {lo}..{hi})")
        return value

    return parse


def number(lo: float, hi: float) -> Parser[float]:
    """A parser of numbers from ``lo`` to ``hi`` (NaN refused)."""

    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number (allowed: {lo}..{hi})") from None
        if math.isnan(value) or not lo <= value <= hi:
            raise ConfigError(f"{name}={raw.strip()} is out of range (allowed: {lo}..{hi})")
        return value

    return parse


def choice(*allowed: str) -> Parser[str]:
    """A parser of one of ``allowed`` (case-insensitive; the value is lower-cased)."""

    def parse(name: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ConfigError(f"{name}={raw!r} is invalid (allowed: {', '.join(allowed)})")
        return value

    return parse


def url(name: str, raw: str) -> str:
    """A URL with a scheme (``scheme://host...``); empty stays empty."""
    value = raw.strip()
    if value and not re.match(r"^[a-z][a-z0-9+.-]*://", value):
        raise ConfigError(f"{name}={raw!r} is not a URL (expected scheme://host...)")
    return value


def host_port(name: str, raw: str) -> str:
    """``host:port`` with a port from 1 to 65535."""
    value = raw.strip()
    if not re.fullmatch(r"[^\s:/]+:\d{1,5}", value) or not 0 < int(value.rsplit(":", 1)[1]) < 65536:
        raise ConfigError(f"{name}={raw!r} is not host:port")
    return value


@dataclass(frozen=True, slots=True)
class Setting[T]:
    """One environment variable a component reads.

    ``env`` is the variable; ``default`` its value when unset or blank; ``parse`` turns a
    non-blank value into the setting's value or raises ConfigError (see ``Parser``);
    ``secret`` hides the value in logs, ``smriti doctor`` and ``repr``; ``help`` is its
    line in the settings reference (``docs/settings.md``). ``default_text`` describes a
    default that is not a plain value (``CPU count (capped)``).

    Build one with a constructor that says its type (``Setting.text``, ``.integer``,
    ``.number``, ``.choice``, ``.url``, ``.host_port``) or give any ``parse`` function.
    """

    env: str
    default: T
    parse: Parser[T] = field(default=text, compare=False)  # type: ignore[assignment]
    secret: bool = False
    help: str = ""
    default_text: str = ""

    def __post_init__(self) -> None:
        if not _ENV_NAME.fullmatch(self.env):
            raise ValueError(f"Setting({self.env!r}): the variable must be UPPER_CASE")

    def read(self, environ: Mapping[str, str]) -> T:
        """The value in ``environ``: the default when unset or blank, else parsed
        (ConfigError naming the variable when it is invalid)."""
        raw = environ.get(self.env, "")
        return self.parse(self.env, raw) if raw.strip() else self.default

    def shown(self, value: Any) -> str:
        """``value`` as logs and doctor may show it: ``set``/``unset`` for a secret."""
        if self.secret:
            return "set" if value else "unset"
        return "unset" if value in (None, "", ()) else str(value)

    @classmethod
    def text(cls, env: str, default: str = "", **kw: Any) -> Setting[str]:
        """A text setting (spaces around the value dropped)."""
        return Setting(env, default, text, **kw)

    @classmethod
    def integer(cls, env: str, default: int, lo: int, hi: int, **kw: Any) -> Setting[int]:
        """A whole number from ``lo`` to ``hi``."""
        return Setting(env, default, integer(lo, hi), **kw)

    @classmethod
    def number(cls, env: str, default: float, lo: float, hi: float, **kw: Any) -> Setting[float]:
        """A number from ``lo`` to ``hi``."""
        return Setting(env, default, number(lo, hi), **kw)

    @classmethod
    def choice(cls, env: str, default: str, allowed: Iterable[str], **kw: Any) -> Setting[str]:
        """One of ``allowed`` (case-insensitive)."""
        return Setting(env, default, choice(*allowed), **kw)

    @classmethod
    def url(cls, env: str, default: str = "", **kw: Any) -> Setting[str]:
        """A URL with a scheme, or empty."""
        return Setting(env, default, url, **kw)

    @classmethod
    def host_port(cls, env: str, default: str, **kw: Any) -> Setting[str]:
        """``host:port``."""
        return Setting(env, default, host_port, **kw)


def read_all(declared: Iterable[Setting[Any]], environ: Mapping[str, str]) -> dict[str, Any]:
    """The value of each declared setting by variable (ConfigError on the first bad one)."""
    return {s.env: s.read(environ) for s in declared}
