"""The settings the embedded graph backends (Kùzu, LadybugDB) read
(``EmbeddedGraphBackend.declared_settings``)."""

from __future__ import annotations

from smriti import ConfigError, Setting

#: Kùzu's page buffer pool; 0 keeps Kùzu's default (80 % of the machine's memory, used
#: only as pages are touched). A small pool is risky: with 256 MB, the commit of a bulk
#: import at 100k memories failed with "buffer pool is full" (README).
MIN_BUFFER_MB = 64


def buffer_megabytes(name: str, raw: str) -> int:
    """0 (the engine's default) or at least ``MIN_BUFFER_MB`` megabytes."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not an integer (allowed: 0, or {MIN_BUFFER_MB} megabytes and more)"
        ) from None
    if value < 0:
        raise ConfigError(f"{name}={raw!r} must be at least 0 (megabytes)")
    if 0 < value < MIN_BUFFER_MB:
        raise ConfigError(f"{name}={value} must be 0 (Kùzu's default) or at least {MIN_BUFFER_MB}")
    return value


BUFFER_MB = Setting(
    "SMRITI_KUZU_BUFFER_MB",
    0,
    buffer_megabytes,
    help="Kùzu/LadybugDB page buffer pool in megabytes; 0: the engine's default.",
)
#: The budget of the vector cache and mirror this backend kept before the core's working
#: set replaced them; ``SMRITI_WORKING_SET_MB`` is the setting now (a warning says so).
OLD_CACHE_MB = Setting.text(
    "SMRITI_KUZU_CACHE_MB",
    "",
    help="No longer used (a warning says so): `SMRITI_WORKING_SET_MB` is the memory budget.",
)
SETTINGS = (BUFFER_MB, OLD_CACHE_MB)
