"""Settings from environment variables (same names as the reference server), validated once.

Every invalid value raises ConfigError with one line naming the variable and what it
accepts. Secrets are excluded from ``repr`` and from ``Settings.public()``.
"""

from __future__ import annotations

import getpass
import os
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from smriti.errors import ConfigError
from smriti.setting import Setting
from smriti.setting import choice as _choice
from smriti.setting import integer as _int
from smriti.setting import number as _float
from smriti.setting import text as _str
from smriti.setting import url as _url

#: A canonical user name (see ``canonical_user``): ASCII, lower case.
USER_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
#: The core's secret settings; a plugin marks its own (``Setting.secret``).
SECRET_FIELDS = frozenset({"llm_api_key", "embedding_api_key"})


def canonical_user(name: str) -> str:
    """The one spelling of a user name: Unicode NFKC, then case-folded (and NFKC again,
    as case folding can leave a denormalised string).

    ``Bob``, ``bob`` and ``ｂｏｂ`` (full-width) are one person: on a case-insensitive
    file system their directories are one, and on a case-sensitive one they would be
    two stores for one person. Every user name is compared and stored in this form.
    """
    folded = unicodedata.normalize("NFKC", name).casefold()
    return unicodedata.normalize("NFKC", folded)


def validate_user(name: str, variable: str = "ACCESSING_USER") -> str:
    """Return the canonical form of ``name`` (``canonical_user``) if it is a safe user
    name, else raise ConfigError.

    After canonicalisation: 1–64 characters from lower-case letters, digits, ``.``,
    ``_`` and ``-``, starting with a letter or digit: safe as a directory, database or
    graph name component, and the same for every spelling of one name.
    """
    canonical = canonical_user(name) if isinstance(name, str) else None
    if canonical is None or not USER_RE.fullmatch(canonical) or canonical.endswith("."):
        shown = repr(name)[:40]
        raise ConfigError(
            f"{variable}={shown} is not a valid user name: use 1-64 letters, digits, "
            "'.', '_' or '-', starting with a letter or digit (upper and lower case are "
            "the same name)"
        )
    return canonical


def _default_user() -> str:
    try:
        raw = getpass.getuser()
    except Exception:  # no login name (containers): fall back to a fixed name
        raw = "default"
    cleaned = re.sub(r"[^a-z0-9._-]", "_", canonical_user(raw)).strip("._-")[:64]
    return cleaned or "default"


def _check_blank_user(environ: Mapping[str, str], overrides: Mapping[str, Any]) -> None:
    """ConfigError when ACCESSING_USER is set but blank (unset means the OS user).

    A blank value is usually a templating slip (``ACCESSING_USER=${USER_NAME}``); quietly
    using the OS user instead would put the memories in someone else's store.
    """
    raw = environ.get("ACCESSING_USER")
    if raw is not None and not raw.strip() and overrides.get("accessing_user") is None:
        raise ConfigError(
            "ACCESSING_USER is set but empty: give a user name, or unset it to use the "
            f"OS user ({_default_user()!r})"
        )


def _float_or_off(lo: float, hi: float) -> Callable[[str, str], float | None]:
    inner = _float(lo, hi)

    def parse(name: str, raw: str) -> float | None:
        if raw.strip().lower() == "off":
            return None
        try:
            return inner(name, raw)
        except ConfigError as exc:
            raise ConfigError(f"{exc} or 'off'") from None

    return parse


def _name(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", value):
        raise ConfigError(f"{name}={raw!r} is not a plugin name (letters, digits, '-', '_', '.')")
    return value


def _path(name: str, raw: str) -> Path:
    if "\x00" in raw or not raw.strip():
        raise ConfigError(f"{name} must be a directory path")
    return Path(raw.strip()).expanduser()


def _user(name: str, raw: str) -> str:
    return validate_user(raw, name)


def _dims(name: str, raw: str) -> int | None:
    return None if not raw.strip() else _int(1, 65536)(name, raw)


def _scope(name: str, raw: str) -> str:
    value = raw.strip()
    if not re.fullmatch(r"[\x21\x23-\x5b\x5d-\x7e]{1,128}", value):
        raise ConfigError(f"{name}={raw!r} is not one OAuth scope or claim name (no spaces)")
    return value


def _list(name: str, raw: str) -> tuple[str, ...]:
    """A comma-separated list (spaces around items ignored, empty items dropped)."""
    items = tuple(item.strip() for item in raw.split(",") if item.strip())
    if any(re.search(r"\s", item) for item in items):
        raise ConfigError(f"{name}={raw!r} is not a comma-separated list of names")
    return items


def _rate(name: str, raw: str) -> str | float:
    """``auto``, ``off`` or a number of calls per minute."""
    value = raw.strip().lower()
    if value in ("auto", "off"):
        return value
    try:
        return _float(0.01, 1e7)(name, value)
    except ConfigError:
        raise ConfigError(
            f"{name}={raw!r} is invalid (allowed: auto, off, or tool calls per minute "
            "0.01..10000000)"
        ) from None


_LOG_LEVELS = ("debug", "info", "warning", "error")
#: SMRITI_AUTH: ``auto`` turns on OAuth when SMRITI_OAUTH_ISSUER is set and API keys
#: when the key file exists; ``none`` only serves a loopback address.
AUTH_MODES = ("auto", "none", "keys", "oauth", "keys+oauth")


@dataclass(frozen=True, slots=True)
class Settings:
    """Validated configuration. Build it with ``Settings.from_env()``."""

    accessing_user: str = field(
        default_factory=_default_user, metadata={"env": "ACCESSING_USER", "parse": _user}
    )
    storage_location: Path = field(
        default_factory=lambda: Path.home() / ".smriti",
        metadata={"env": "STORAGE_LOCATION", "parse": _path},
    )
    db_type: str = field(default="auto", metadata={"env": "DB_TYPE", "parse": _name})

    llm_base_url: str = field(
        default="https://api.openai.com/v1", metadata={"env": "LLM_BASE_URL", "parse": _url}
    )
    llm_api_key: str = field(default="", repr=False, metadata={"env": "LLM_API_KEY", "parse": _str})
    llm_model: str = field(default="gpt-4o-mini", metadata={"env": "LLM_MODEL", "parse": _str})
    llm_timeout: float = field(
        default=30.0, metadata={"env": "LLM_TIMEOUT", "parse": _float(0.1, 600)}
    )
    llm_max_retries: int = field(
        default=3, metadata={"env": "LLM_MAX_RETRIES", "parse": _int(0, 10)}
    )

    embedding_base_url: str = field(
        default="", metadata={"env": "EMBEDDING_BASE_URL", "parse": _url}
    )
    embedding_api_key: str = field(
        default="", repr=False, metadata={"env": "EMBEDDING_API_KEY", "parse": _str}
    )
    embedding_model: str = field(
        default="text-embedding-3-small", metadata={"env": "EMBEDDING_MODEL", "parse": _str}
    )
    embedding_dims: int | None = field(
        default=None, metadata={"env": "EMBEDDING_DIMS", "parse": _dims}
    )
    embedder: str = field(default="auto", metadata={"env": "SMRITI_EMBEDDER", "parse": _name})
    cue_extractor: str = field(
        default="auto", metadata={"env": "SMRITI_CUE_EXTRACTOR", "parse": _name}
    )
    backup_type: str = field(default="none", metadata={"env": "BACKUP_TYPE", "parse": _name})
    backup_sync_interval: int = field(
        default=60, metadata={"env": "BACKUP_SYNC_INTERVAL", "parse": _int(0, 10**7)}
    )
    consolidation_interval: int = field(
        default=3600, metadata={"env": "CONSOLIDATION_INTERVAL", "parse": _int(0, 10**7)}
    )
    decay_rate: float = field(
        default=0.01, metadata={"env": "DECAY_RATE", "parse": _float(0.0, 10.0)}
    )
    prune_decay_threshold: float = field(
        default=0.05, metadata={"env": "PRUNE_DECAY_THRESHOLD", "parse": _float(0.0, 1.0)}
    )
    prune_importance_threshold: float = field(
        default=0.3, metadata={"env": "PRUNE_IMPORTANCE_THRESHOLD", "parse": _float(0.0, 1.0)}
    )
    index_threshold: int = field(
        default=50, metadata={"env": "INDEX_THRESHOLD", "parse": _int(0, 10**9)}
    )

    association_threshold: float = field(
        default=0.7, metadata={"env": "ASSOCIATION_THRESHOLD", "parse": _float(-1.0, 1.0)}
    )
    association_top_k: int = field(
        default=10, metadata={"env": "ASSOCIATION_TOP_K", "parse": _int(0, 100)}
    )
    dedup_threshold: float | None = field(
        default=0.95, metadata={"env": "DEDUP_THRESHOLD", "parse": _float_or_off(0.0, 1.0)}
    )
    conflict_threshold: float = field(
        default=0.8, metadata={"env": "CONFLICT_THRESHOLD", "parse": _float(0.0, 1.0)}
    )
    contiguity_seconds: int = field(
        default=1800, metadata={"env": "CONTIGUITY_SECONDS", "parse": _int(0, 10**7)}
    )
    weight_similarity: float = field(
        default=0.4, metadata={"env": "WEIGHT_SIMILARITY", "parse": _float(0.0, 10.0)}
    )
    weight_recency: float = field(
        default=0.2, metadata={"env": "WEIGHT_RECENCY", "parse": _float(0.0, 10.0)}
    )
    weight_importance: float = field(
        default=0.2, metadata={"env": "WEIGHT_IMPORTANCE", "parse": _float(0.0, 10.0)}
    )
    weight_decay: float = field(
        default=0.2, metadata={"env": "WEIGHT_DECAY", "parse": _float(0.0, 10.0)}
    )
    cluster_penalty: float = field(
        default=0.5, metadata={"env": "CLUSTER_PENALTY", "parse": _float(0.0, 1.0)}
    )

    erase_delay: int = field(
        default=30, metadata={"env": "SMRITI_ERASE_DELAY", "parse": _int(0, 86_400)}
    )
    max_content_chars: int = field(
        default=50_000, metadata={"env": "SMRITI_MAX_CONTENT_CHARS", "parse": _int(1, 10**7)}
    )
    max_recall_limit: int = field(
        default=100, metadata={"env": "SMRITI_MAX_RECALL_LIMIT", "parse": _int(1, 10_000)}
    )
    secrets: str = field(
        default="redact",
        metadata={"env": "SMRITI_SECRETS", "parse": _choice("redact", "refuse", "allow")},
    )
    owner: str = field(
        default="auto", metadata={"env": "SMRITI_OWNER", "parse": _choice("auto", "off")}
    )
    owner_idle: int = field(
        default=300, metadata={"env": "SMRITI_OWNER_IDLE", "parse": _int(0, 10**7)}
    )
    working_set: str = field(
        default="auto",
        metadata={"env": "SMRITI_WORKING_SET", "parse": _choice("auto", "on", "off")},
    )
    working_set_mb: int = field(
        default=2048, metadata={"env": "SMRITI_WORKING_SET_MB", "parse": _int(0, 10**7)}
    )
    log_level: str = field(
        default="info", metadata={"env": "LOG_LEVEL", "parse": _choice(*_LOG_LEVELS)}
    )

    # HTTP for a team (smriti.auth, smriti.mcp_server.http): who may call, as whom.
    auth: str = field(
        default="auto", metadata={"env": "SMRITI_AUTH", "parse": _choice(*AUTH_MODES)}
    )
    api_keys_file: str = field(default="", metadata={"env": "SMRITI_API_KEYS_FILE", "parse": _str})
    public_url: str = field(default="", metadata={"env": "SMRITI_PUBLIC_URL", "parse": _url})
    oauth_issuer: str = field(default="", metadata={"env": "SMRITI_OAUTH_ISSUER", "parse": _url})
    oauth_audience: str = field(
        default="", metadata={"env": "SMRITI_OAUTH_AUDIENCE", "parse": _str}
    )
    oauth_jwks_url: str = field(
        default="", metadata={"env": "SMRITI_OAUTH_JWKS_URL", "parse": _url}
    )
    oauth_read_scope: str = field(
        default="smriti:read", metadata={"env": "SMRITI_OAUTH_READ_SCOPE", "parse": _scope}
    )
    oauth_write_scope: str = field(
        default="smriti:write", metadata={"env": "SMRITI_OAUTH_WRITE_SCOPE", "parse": _scope}
    )
    oauth_user_claim: str = field(
        default="sub", metadata={"env": "SMRITI_OAUTH_USER_CLAIM", "parse": _scope}
    )
    allowed_hosts: tuple[str, ...] = field(
        default=(), metadata={"env": "SMRITI_ALLOWED_HOSTS", "parse": _list}
    )
    allowed_origins: tuple[str, ...] = field(
        default=(), metadata={"env": "SMRITI_ALLOWED_ORIGINS", "parse": _list}
    )
    max_loaded_users: int = field(
        default=32, metadata={"env": "SMRITI_MAX_LOADED_USERS", "parse": _int(1, 100_000)}
    )
    # The team server's limits (smriti.mcp_server.limits, .guard) and its records.
    principals_file: str = field(
        default="", metadata={"env": "SMRITI_PRINCIPALS_FILE", "parse": _str}
    )
    user_sessions: int = field(
        default=100, metadata={"env": "SMRITI_USER_SESSIONS", "parse": _int(1, 10_000)}
    )
    key_sessions: int = field(
        default=50, metadata={"env": "SMRITI_KEY_SESSIONS", "parse": _int(1, 10_000)}
    )
    session_idle: float = field(
        default=600.0, metadata={"env": "SMRITI_SESSION_IDLE", "parse": _float(1.0, 86_400.0)}
    )
    rate_limit: str | float = field(
        default="auto", metadata={"env": "SMRITI_RATE_LIMIT", "parse": _rate}
    )
    rate_burst: int = field(
        default=60, metadata={"env": "SMRITI_RATE_BURST", "parse": _int(1, 100_000)}
    )
    http_header_timeout: float = field(
        default=10.0,
        metadata={"env": "SMRITI_HTTP_HEADER_TIMEOUT", "parse": _float(0.1, 3600.0)},
    )
    http_body_timeout: float = field(
        default=30.0, metadata={"env": "SMRITI_HTTP_BODY_TIMEOUT", "parse": _float(0.1, 3600.0)}
    )
    http_keepalive: float = field(
        default=65.0, metadata={"env": "SMRITI_HTTP_KEEPALIVE", "parse": _float(0.1, 3600.0)}
    )
    http_max_connections: int = field(
        default=1000, metadata={"env": "SMRITI_HTTP_MAX_CONNECTIONS", "parse": _int(1, 1_000_000)}
    )
    audit_log: str = field(default="", metadata={"env": "SMRITI_AUDIT_LOG", "parse": _str})
    env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read and validate settings from ``environ`` (default ``os.environ``).

        ``overrides`` (e.g. CLI flags) take precedence; strings are parsed like
        environment values, other values are used as given. An override that names no
        core setting is a plugin's setting (``smriti.Setting``) by its variable in lower
        case (``git_base_url`` for ``GIT_BASE_URL``): it is put in ``env`` as a string.
        """
        environ = dict(os.environ if environ is None else environ)
        _check_blank_user(environ, overrides)
        known = {f.name for f in fields(cls)}
        for name, given in overrides.items():
            if name not in known and given is not None:
                environ[name.upper()] = given if isinstance(given, str) else str(given)
        values: dict[str, Any] = {"env": environ}
        for f in fields(cls):
            if "env" not in f.metadata:
                continue
            parse = f.metadata["parse"]
            var = f.metadata["env"]
            if f.name in overrides and overrides[f.name] is not None:
                given = overrides[f.name]
                values[f.name] = parse(var, given) if isinstance(given, str) else given
            elif environ.get(var, "").strip():
                values[f.name] = parse(var, environ[var])
        return cls(**values)

    @property
    def effective_embedding_api_key(self) -> str:
        """``EMBEDDING_API_KEY``, falling back to ``LLM_API_KEY``."""
        return self.embedding_api_key or self.llm_api_key

    @property
    def effective_embedding_base_url(self) -> str:
        """``EMBEDDING_BASE_URL``, falling back to ``LLM_BASE_URL``."""
        return self.embedding_base_url or self.llm_base_url

    def working_set_for(self, sole_writer: bool) -> bool:
        """Whether the engine answers a backend's reads from a working set in memory
        (``smriti.index``): ``SMRITI_WORKING_SET`` is ``on``, or ``auto`` and the backend
        is its store's only writer (``sole_writer``); and the budget is not 0."""
        if self.working_set_mb <= 0 or self.working_set == "off":
            return False
        return self.working_set == "on" or sole_writer

    def user_dir(self, user: str | None = None) -> Path:
        """The per-user directory under ``STORAGE_LOCATION`` (the name is validated)."""
        return self.storage_location / validate_user(user or self.accessing_user)

    def public(self) -> dict[str, Any]:
        """Settings safe to log or print: secrets replaced by ``set``/``unset``."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if "env" not in f.metadata:
                continue
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS:
                value = "set" if value else "unset"
            out[f.metadata["env"]] = str(value) if isinstance(value, Path) else value
        return out


def core_settings() -> list[tuple[str, Setting[Any]]]:
    """Every core setting as a declaration (like a plugin's), with its field name.

    The settings reference and ``smriti doctor`` treat core and plugin settings alike."""
    out: list[tuple[str, Setting[Any]]] = []
    for f in fields(Settings):
        if "env" not in f.metadata:
            continue
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        declared = Setting(
            f.metadata["env"], default, f.metadata["parse"], secret=f.name in SECRET_FIELDS
        )
        out.append((f.name, declared))
    return out


def settings_table() -> list[tuple[str, str]]:
    """(variable, default) pairs, for documentation."""
    defaults = Settings(accessing_user="<os user>", storage_location=Path("~/.smriti"))
    return [
        (f.metadata["env"], str(getattr(defaults, f.name)))
        for f in fields(Settings)
        if "env" in f.metadata
    ]
