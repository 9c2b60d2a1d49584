"""Per-user API keys: created and revoked with ``smriti keys``, checked by the HTTP server.

A key reads ``smriti_<id>_<secret>``. Only the SHA-256 of the secret is stored (the
secret is 256 random bits, so a plain hash is as strong as a slow one), with the key's
user and scopes, in one JSON file (``SMRITI_API_KEYS_FILE``, default
``{STORAGE_LOCATION}/.api-keys.json``; no user directory can have that name). The file
is written atomically (a temporary file renamed over it) with mode 0600, under an
``flock`` so that two ``smriti keys`` commands never lose each other's change. A running
server looks at the file's identity (inode, size, mtime) on every request and reads it
again when it changed, so a revoked key is refused from the next request on.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.config import canonical_user, validate_user
from smriti.errors import ConfigError, InvalidInput, NotFound
from smriti.private import private_dir

if TYPE_CHECKING:
    from smriti.config import Settings

PREFIX = "smriti"
#: The scopes a key can carry; the server maps them to its scope names.
KEY_SCOPES = ("read", "write")
FILE_VERSION = 1


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One key as stored (never the secret itself)."""

    id: str
    user: str
    scopes: tuple[str, ...]
    created_at: str
    digest: str
    name: str = ""
    revoked_at: str = ""

    @property
    def active(self) -> bool:
        """Whether the key is accepted (not revoked)."""
        return not self.revoked_at

    def public(self) -> dict[str, Any]:
        """What ``smriti keys list`` shows: everything but the digest."""
        return {
            "id": self.id,
            "user": self.user,
            "scopes": list(self.scopes),
            "name": self.name,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at or None,
        }


def keys_file(settings: Settings) -> Path:
    """Where the keys of ``settings`` live."""
    if settings.api_keys_file:
        return Path(settings.api_keys_file).expanduser()
    return settings.storage_location.expanduser() / ".api-keys.json"


def parse_scopes(values: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """Key scopes from ``--scope`` values (default both); InvalidInput for others."""
    chosen = [v.strip().lower() for v in values or KEY_SCOPES]
    bad = [v for v in chosen if v not in KEY_SCOPES]
    if bad or not chosen:
        raise InvalidInput(f"scope must be read or write; got {', '.join(bad) or 'nothing'}")
    return tuple(s for s in KEY_SCOPES if s in chosen)


def _digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


def split_key(token: str) -> tuple[str, str] | None:
    """(id, secret) of a token shaped like a Smriti key, else None."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or len(parts[2]) < 16:
        return None
    return parts[1], parts[2]


class KeyStore:
    """The key file: read, change (create, revoke) and check keys.

    Methods may be called from several threads at once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._keys: dict[str, ApiKey] = {}

    # reading ----------------------------------------------------------------------

    def all_keys(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        return sorted(self._current().values(), key=lambda k: (k.created_at, k.id))

    def exists(self) -> bool:
        """Whether the key file exists (``SMRITI_AUTH=auto`` turns keys on then)."""
        return self.path.exists()

    def check(self, token: str) -> ApiKey | str:
        """The active key ``token`` is, or why it is refused (a short reason)."""
        parts = split_key(token)
        if parts is None:
            return "not a Smriti API key"
        key = self._current().get(parts[0])
        if key is None or not hmac.compare_digest(key.digest, _digest(parts[1])):
            return "unknown API key"
        if not key.active:
            return "API key revoked"
        return key

    def _current(self) -> dict[str, ApiKey]:
        """The keys as the file holds them now (read again when it changed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            with self._lock:
                self._seen, self._keys = None, {}
            return {}
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            if identity != self._seen:
                self._keys = self._read()
                self._seen = identity
            return self._keys

    def _read(self) -> dict[str, ApiKey]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {k["id"]: _from_json(k) for k in data["keys"]}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"the API key file {self.path} cannot be read: {exc}") from None

    # changing ---------------------------------------------------------------------

    def create(self, user: str, scopes: tuple[str, ...] = KEY_SCOPES, name: str = "") -> str:
        """Add a key for ``user``; returns the whole key (shown once, never stored)."""
        user = validate_user(user, "USER")  # the canonical spelling, as everywhere
        if user.startswith("oauth-"):  # smriti.auth.principals: OAuth subjects' names
            raise InvalidInput(
                f"USER={user!r}: names starting 'oauth-' are the memories of OAuth "
                "subjects; to give one a key, map the subject to another name in "
                "SMRITI_PRINCIPALS_FILE and create the key for that name"
            )
        key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        record = ApiKey(
            id=key_id,
            user=user,
            scopes=parse_scopes(scopes),
            created_at=_now(),
            digest=_digest(secret),
            name=name.strip()[:100],
        )
        with self._changing() as keys:
            keys[key_id] = record
        return f"{PREFIX}_{key_id}_{secret}"

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke the key ``key_id`` (NotFound when there is none); returns it."""
        with self._changing() as keys:
            key = keys.get(key_id.strip())
            if key is None:
                raise NotFound(f"no API key {key_id.strip()!r} (see `smriti keys list`)")
            if key.active:
                key = keys[key.id] = _revoked(key)
        return key

    @contextmanager
    def _changing(self) -> Iterator[dict[str, ApiKey]]:
        """The keys to change in place, written back atomically at the end."""
        private_dir(self.path.parent)
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            keys = self._read()
            yield keys
            self._write(keys)
        finally:
            os.close(fd)  # releases the flock

    def _write(self, keys: dict[str, ApiKey]) -> None:
        data = {"version": FILE_VERSION, "keys": [_to_json(k) for k in keys.values()]}
        fd, tmp = tempfile.mkstemp(prefix=".api-keys.", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(self.path.parent)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _revoked(key: ApiKey) -> ApiKey:
    return ApiKey(**{**_to_json(key), "scopes": key.scopes, "revoked_at": _now()})


def _to_json(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "user": key.user,
        "scopes": list(key.scopes),
        "name": key.name,
        "created_at": key.created_at,
        "digest": key.digest,
        "revoked_at": key.revoked_at,
    }


def _from_json(raw: dict[str, Any]) -> ApiKey:
    return ApiKey(
        id=str(raw["id"]),
        user=canonical_user(str(raw["user"])),  # a key made before names were case-folded
        scopes=tuple(str(s) for s in raw["scopes"] if s in KEY_SCOPES),
        created_at=str(raw["created_at"]),
        digest=str(raw["digest"]),
        name=str(raw.get("name", "")),
        revoked_at=str(raw.get("revoked_at") or ""),
    )


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
