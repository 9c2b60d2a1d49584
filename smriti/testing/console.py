"""The real ``smriti`` console script in tests: a clean environment, a run, its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Variables of the caller's environment a test's store must not inherit.
INHERITED_SETTINGS = ("ACCESSING_USER", "DB_TYPE", "LOG_LEVEL")


def console_env(root: Path, user: str = "alice", drop: Iterable[str] = ()) -> dict[str, str]:
    """The environment for ``smriti`` on a store under ``root``: no API keys, no backup,
    HOME inside ``root``, the Hub offline (said at once rather than found out at each
    start); ``drop`` names more variables to leave out."""
    left_out = {*INHERITED_SETTINGS, *drop}
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in left_out}
    env.update(
        STORAGE_LOCATION=str(root / "store"),
        ACCESSING_USER=user,
        HOME=str(root / "home"),
        BACKUP_TYPE="none",
        HF_HUB_OFFLINE="1",
    )
    return env


def run(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``smriti ARGS`` with ``env`` (plus ``extra`` variables), its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "smriti", *args],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=180,
    )


def json_ok(result: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a successful run printed (its stderr in the failure)."""
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
