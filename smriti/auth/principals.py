"""Who a verified caller is, and whose memory that is: namespaced principals.

Two kinds of identity reach the HTTP server. An API key names a user chosen by the
operator (``smriti keys create bob``); an OAuth token names a subject chosen by its
issuer. They must never meet in one namespace: a token with ``sub=bob`` is not the key
user ``bob`` unless the operator says so. So:

- an API key's principal is ``key:<key id>`` and its memory is its user's (``bob``);
- an OAuth token's principal is ``oauth:<issuer>#<subject>`` and its memory is
  ``oauth-<digest>-<subject>``, where the digest (10 hex digits of SHA-256 over the
  exact issuer and subject) keeps apart two issuers' subjects and two subjects that
  differ only in case. ``smriti keys create`` refuses user names starting ``oauth-``,
  so no key user can take such a name;
- the operator may map an OAuth subject to a user name explicitly in a JSON file
  (``SMRITI_PRINCIPALS_FILE``)::

      {"https://login.example.com/": {"248289761001": "bob"}}

  (issuer exactly as in the tokens' ``iss``, then subject -> user). A mapped subject
  uses that user's memory, the same one as ``bob``'s API keys. The file is read again
  when it changes, so a mapping needs no restart.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smriti.config import validate_user
from smriti.errors import ConfigError

#: The prefix of the memory names of unmapped OAuth subjects (refused for key users).
OAUTH_PREFIX = "oauth-"
#: Hex digits of the issuer+subject digest in such a name.
DIGEST_CHARS = 10


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified caller: ``id`` names the credential's holder (``key:<id>`` or
    ``oauth:<issuer>#<subject>``), ``user`` the memory it uses."""

    id: str
    user: str
    #: ``key`` or ``oauth``.
    kind: str

    def __str__(self) -> str:
        return self.id


def key_principal(key_id: str, user: str) -> Principal:
    """The principal of an API key."""
    return Principal(f"key:{key_id}", user, "key")


def oauth_user(issuer: str, subject: str) -> str:
    """The memory name of an unmapped OAuth subject (see the module doc); ConfigError
    when ``subject`` is not a valid user name."""
    readable = validate_user(subject, "token subject")
    digest = hashlib.sha256(f"{issuer}\x00{subject}".encode()).hexdigest()[:DIGEST_CHARS]
    room = 64 - len(OAUTH_PREFIX) - DIGEST_CHARS - 1
    return validate_user(f"{OAUTH_PREFIX}{digest}-{readable[:room].rstrip('.')}", "token subject")


def is_reserved(user: str) -> bool:
    """Whether ``user`` is in the OAuth namespace (not a name for an API key user)."""
    return user.startswith(OAUTH_PREFIX)


class PrincipalMap:
    """The operator's explicit OAuth subject -> user mappings (``SMRITI_PRINCIPALS_FILE``).

    An empty path maps nothing. Methods may be called from several threads at once.
    """

    def __init__(self, path: str | Path = "") -> None:
        self.path = Path(path).expanduser() if path else None
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._map: dict[str, dict[str, str]] = {}
        if self.path is not None:
            self._current()  # a broken file stops the server at startup

    def principal(self, issuer: str, subject: str) -> Principal:
        """The principal of an OAuth token; ConfigError for a subject that is not a
        valid user name (and not mapped)."""
        pid = f"oauth:{issuer}#{subject}"
        mapped = self._current().get(issuer, {}).get(subject)
        if mapped is not None:
            return Principal(pid, mapped, "oauth")
        return Principal(pid, oauth_user(issuer, subject), "oauth")

    def _current(self) -> dict[str, dict[str, str]]:
        if self.path is None:
            return {}
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise ConfigError(
                f"SMRITI_PRINCIPALS_FILE={str(self.path)!r} does not exist: create it "
                '(JSON: {"<issuer>": {"<subject>": "<user>"}}) or unset the variable'
            ) from None
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            if identity != self._seen:
                self._map = _read_map(self.path)
                self._seen = identity
            return self._map


def _read_map(path: Path) -> dict[str, dict[str, str]]:
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"SMRITI_PRINCIPALS_FILE {path} cannot be read: {exc}") from None
    shape = 'expected {"<issuer>": {"<subject>": "<user>"}}'
    if not isinstance(raw, dict):
        raise ConfigError(f"SMRITI_PRINCIPALS_FILE {path}: {shape}")
    out: dict[str, dict[str, str]] = {}
    for issuer, subjects in raw.items():
        if not isinstance(subjects, dict):
            raise ConfigError(f"SMRITI_PRINCIPALS_FILE {path}: issuer {issuer!r}: {shape}")
        out[issuer] = {
            str(sub): validate_user(user, f"SMRITI_PRINCIPALS_FILE[{issuer!r}][{sub!r}]")
            for sub, user in subjects.items()
        }
    return out
