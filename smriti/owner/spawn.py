"""Starting an owner process for a store, and the settings it is started with.

The owner is ``python -m smriti owner run`` in a session of its own (a terminal's
Ctrl-C or an MCP client ending its server's process group does not reach it), with
the environment of the process that started it, its log in the store directory, and
a pipe on which it writes one line once it listens (``ready``) or has failed
(``error`` and the error). Starts are serialised by an ``flock`` on a file in the
store directory, so simultaneous launches start one owner and the others attach.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from smriti.config import SECRET_FIELDS, Settings
from smriti.owner.paths import OwnerPaths
from smriti.plugins import installed_settings
from smriti.private import open_private, private_dir

if TYPE_CHECKING:
    from typing import Literal

#: Environment variables besides the settings that change what an owner does.
EXTRA_PREFIXES = ("SMRITI_", "HF_")
EXTRA_NAMES = ("XDG_CACHE_HOME", "TRANSFORMERS_OFFLINE")  # where the model is, if it may be fetched
#: Variables that only concern the process that reads them, never the owner's work.
CLIENT_ONLY = (
    "SMRITI_OWNER",
    "LOG_LEVEL",
    # how an HTTP server admits its callers (smriti.auth): never the owner's business
    "SMRITI_AUTH",
    "SMRITI_API_KEYS_FILE",
    "SMRITI_PUBLIC_URL",
    "SMRITI_OAUTH_ISSUER",
    "SMRITI_OAUTH_AUDIENCE",
    "SMRITI_OAUTH_JWKS_URL",
    "SMRITI_OAUTH_READ_SCOPE",
    "SMRITI_OAUTH_WRITE_SCOPE",
    "SMRITI_OAUTH_USER_CLAIM",
    "SMRITI_ALLOWED_HOSTS",
    "SMRITI_ALLOWED_ORIGINS",
    "SMRITI_MAX_LOADED_USERS",
)
SECRET_EXTRA = ("HF_TOKEN",)
#: The owner's log is cut back to this size when an owner starts.
MAX_LOG_BYTES = 5_000_000


@contextmanager
def start_lock(paths: OwnerPaths) -> Iterator[None]:
    """Hold the store's start lock (blocking until another starter is done)."""
    private_dir(paths.dir)
    fd = os.open(paths.start_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def owner_env(settings: Settings) -> dict[str, str]:
    """The environment of an owner for ``settings`` (command-line overrides included)."""
    env = dict(settings.env or os.environ)
    env.update(
        ACCESSING_USER=settings.accessing_user,
        STORAGE_LOCATION=os.fspath(settings.storage_location.expanduser().resolve()),
        DB_TYPE=settings.db_type,
        LOG_LEVEL=settings.log_level,
    )
    return env


def fingerprint(settings: Settings) -> dict[str, str]:
    """What an owner's behaviour depends on, by variable; secrets as short digests."""
    out: dict[str, str] = {}
    for f in fields(Settings):
        var = f.metadata.get("env")
        if not var or var in CLIENT_ONLY:
            continue
        value = getattr(settings, f.name)
        if f.name == "storage_location":
            value = value.expanduser().resolve()
        out[var] = _digest(str(value)) if f.name in SECRET_FIELDS else str(value)
    env = settings.env or {}
    for declared in installed_settings(settings.env or None):  # the plugins' own settings
        raw = env.get(declared.env, "").strip()
        out[declared.env] = _digest(raw) if declared.secret else raw
    for var, value in env.items():
        relevant = var.startswith(EXTRA_PREFIXES) or var in EXTRA_NAMES
        if relevant and not var.startswith(CLIENT_ONLY) and var not in out:
            out[var] = _digest(value) if var in SECRET_EXTRA else value
    return out


def differences(owner: dict[str, str], mine: dict[str, str]) -> list[str]:
    """The variables whose values differ, sorted."""
    return sorted(k for k in owner.keys() | mine.keys() if owner.get(k) != mine.get(k))


def _digest(value: str) -> str:
    return "secret:" + hashlib.sha256(value.encode()).hexdigest()[:12] if value else ""


def start_owner(
    settings: Settings, paths: OwnerPaths
) -> tuple[Literal["ready", "error", "died"], dict[str, Any]]:
    """Start an owner and wait for its first line: ready, an error (its payload), or
    nothing because it died first."""
    private_dir(paths.dir)
    _trim_log(paths)
    read_end, write_end = os.pipe()
    with open_private(paths.log, "ab") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "smriti", "owner", "run", "--ready-fd", str(write_end)],
            pass_fds=(write_end,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            env=owner_env(settings),
            cwd=_cwd(paths),  # relative paths in settings mean what they meant here
            start_new_session=True,
        )
    os.close(write_end)
    # Reap it whenever it ends, so no zombie outlives it in a long-running client.
    threading.Thread(target=proc.wait, name="smriti-owner-reaper", daemon=True).start()
    with os.fdopen(read_end, "rb") as ready:
        line = ready.readline().decode("utf-8", "replace").strip()
    if line == "ready":
        return "ready", {}
    if line.startswith("error "):
        try:
            return "error", dict(json.loads(line[len("error ") :]))
        except ValueError:
            pass
    return "died", {}


def _cwd(paths: OwnerPaths) -> str:
    try:
        return os.getcwd()
    except OSError:  # this directory was removed
        return os.fspath(paths.dir)


def _trim_log(paths: OwnerPaths) -> None:
    try:
        if paths.log.stat().st_size > MAX_LOG_BYTES:
            os.replace(paths.log, paths.log.with_suffix(".log.1"))
    except OSError:
        pass
