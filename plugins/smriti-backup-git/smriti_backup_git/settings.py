"""The settings the git backup reads (``GitBackup.declared_settings``)."""

from __future__ import annotations

from smriti import ConfigError, Setting


def seconds(name: str, raw: str) -> float:
    """Seconds from 1 to 3600 (one git command's time limit)."""
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if not 1.0 <= value <= 3600.0:
        raise ConfigError(f"{name}={raw!r} is invalid (allowed: seconds, 1..3600)")
    return value


GIT_BASE_URL = Setting.text(
    "GIT_BASE_URL",
    "",
    help="Git backup remote: a repository URL ending in `.git`, or a base URL under which "
    "`{user}-smriti.git` is used.",
)
GIT_TIMEOUT = Setting("SMRITI_GIT_TIMEOUT", 120.0, seconds, help="Seconds per git command.")
GIT_BRANCH = Setting.text(
    "SMRITI_GIT_BRANCH", "", help="Branch to push to and restore from; unset: detected."
)
SETTINGS = (GIT_BASE_URL, GIT_TIMEOUT, GIT_BRANCH)
