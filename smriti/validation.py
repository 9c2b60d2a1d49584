"""Validation of tool and CLI arguments: clear InvalidInput errors, nothing half-done."""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, date, datetime
from pathlib import Path

from smriti import secrets
from smriti.errors import ConfigError, InvalidInput
from smriti.model import MEMORY_TYPES, ORIGIN_IMPORT_PREFIX, check_origin

RECALL_MODES = ("recall", "search", "list")
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_SOURCE_CHARS = 512
MAX_QUERY_CHARS = 4096
MAX_ID_CHARS = 128


def content(value: object, max_chars: int) -> str:
    """Memory content: a non-blank string of at most ``max_chars`` characters, no NUL."""
    if not isinstance(value, str):
        raise InvalidInput(f"content must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInput("content is empty: give the text to remember")
    if len(value) > max_chars:
        raise InvalidInput(
            f"content is {len(value)} characters, over the limit of {max_chars} "
            "(SMRITI_MAX_CONTENT_CHARS); split it into smaller memories"
        )
    if "\x00" in value:
        raise InvalidInput("content contains NUL characters")
    return value.strip()


def importance(value: object) -> float:
    """Importance: a number in [0, 1] (numeric strings accepted)."""
    if isinstance(value, bool):
        raise InvalidInput("importance must be a number between 0.0 and 1.0, got a boolean")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidInput(
            f"importance must be a number between 0.0 and 1.0, got {value!r}"
        ) from None
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"importance must be between 0.0 and 1.0, got {value!r}")
    return number


def tags(value: object) -> list[str]:
    """Tags: a comma-separated string or a list; trimmed, de-duplicated, bounded."""
    if value is None:
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
        items = list(value)
    else:
        raise InvalidInput("tags must be a comma-separated string")
    out: list[str] = []
    for raw in items:
        tag = " ".join(raw.split())
        if not tag or tag in out:
            continue
        if "\x00" in tag:
            raise InvalidInput("tags contain NUL characters")
        if len(tag) > MAX_TAG_CHARS:
            # the start of a tag may be the start of a secret: shown redacted
            shown = secrets.scrub(tag)[:20]
            raise InvalidInput(f"tag {shown!r}... is longer than {MAX_TAG_CHARS} characters")
        out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"{len(out)} tags given; at most {MAX_TAGS} are allowed")
    return out


def source(value: object) -> str:
    """Source: an optional short string."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("source must be a string")
    if len(value) > MAX_SOURCE_CHARS or "\x00" in value:
        raise InvalidInput(f"source must be at most {MAX_SOURCE_CHARS} characters, without NUL")
    return value.strip()


#: Longest principal (an authenticated caller's id: a key id, or an issuer and subject).
MAX_PRINCIPAL_CHARS = 512


def origin(value: object) -> str:
    """Who said a memory: ``user``, ``agent``, ``tool`` or ``import:<format>``."""
    if not isinstance(value, str):
        raise InvalidInput("origin must be a string: user, agent, tool or import:<format>")
    try:
        return check_origin(value.strip().lower())
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc


def origin_filter(value: object) -> str | None:
    """Recall's origin filter: None/blank for all, an origin, or a prefix ending in ``:``
    (``import:`` for every import)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str) and value.strip().lower() == ORIGIN_IMPORT_PREFIX:
        return ORIGIN_IMPORT_PREFIX
    return origin(value)


def principal(value: object) -> str:
    """The authenticated caller that stores a memory ("" for none)."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_PRINCIPAL_CHARS or "\x00" in value:
        raise InvalidInput(f"principal must be a string of at most {MAX_PRINCIPAL_CHARS} chars")
    return value


def limit(value: object, maximum: int) -> int:
    """Result limit: an integer in [1, maximum]."""
    if isinstance(value, bool):
        raise InvalidInput("limit must be a whole number")
    try:
        number = int(value)  # type: ignore[call-overload]
        exact = float(value) == number  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"limit must be a whole number, got {value!r}") from None
    if not exact:
        raise InvalidInput(f"limit must be a whole number, got {value!r}")
    if not 1 <= number <= maximum:
        raise InvalidInput(f"limit must be between 1 and {maximum}, got {number}")
    return number


def mode(value: object) -> str:
    """Recall mode: recall, search or list."""
    text = (value or "recall") if isinstance(value, str) else value
    if text not in RECALL_MODES:
        raise InvalidInput(f"mode must be one of {', '.join(RECALL_MODES)}, got {value!r}")
    return str(text)


def memory_type(value: object) -> str | None:
    """Memory type filter: None/blank for all, else episodic, semantic or procedural."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in MEMORY_TYPES:
        raise InvalidInput(f"memory_type must be one of {', '.join(MEMORY_TYPES)}, got {value!r}")
    return str(text)


def query(value: object) -> str | None:
    """Recall query: None/blank means list mode."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput("query must be a string")
    if "\x00" in value:
        raise InvalidInput("query contains NUL characters")
    text = value.strip()
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is longer than {MAX_QUERY_CHARS} characters")
    return text or None


def memory_id(value: object, action: str = "forget") -> str:
    """A memory id: a non-blank string (``action`` names what it is for, in the error)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"memory_id is required: give the id of the memory to {action}")
    text = value.strip()
    if len(text) > MAX_ID_CHARS or "\x00" in text:
        raise InvalidInput(f"memory_id {text[:20]!r}... is not a valid memory id")
    return text


def new_memory_id(value: object) -> str:
    """A caller-chosen id for a new memory: 32 lower-case hex digits, like ``new_id``."""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{32}", value):
        raise InvalidInput(f"memory_id {str(value)[:40]!r} is not 32 lower-case hex digits")
    return value


TAG_MATCHES = ("any", "all")


def tag_match(value: object) -> str:
    """How recall's ``tags`` filter matches: ``any`` (the default) or ``all``."""
    chosen = value.strip().lower() if isinstance(value, str) else value
    if chosen in (None, ""):
        return "any"
    if chosen not in TAG_MATCHES:
        raise InvalidInput(f"tag_match must be 'any' or 'all', got {str(value)[:40]!r}")
    return str(chosen)


def moment(value: object, name: str) -> datetime | None:
    """An ISO 8601 date or date-time (``since``, ``until``) as aware UTC; None when blank.

    A date alone is its midnight UTC; a time without an offset is taken as UTC.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{name} must be an ISO 8601 date or date-time such as 2026-05-01 or "
                f"2026-05-01T14:30:00Z, got {text[:40]!r}"
            ) from None
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    else:
        raise InvalidInput(f"{name} must be an ISO 8601 string, got {type(value).__name__}")
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def flag(value: object, name: str) -> bool:
    """A boolean argument; also accepts true/false/yes/no/1/0 as strings."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "0", "off", ""):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidInput(f"{name} must be true or false, got {str(value)[:40]!r}")


def input_file(value: str | os.PathLike[str]) -> Path:
    """A file to read: it exists, is not a directory, and can be opened for reading."""
    path = Path(value).expanduser()
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory; give a file")
    try:
        with path.open("rb"):
            pass
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no such file") from None
    except PermissionError:
        raise InvalidInput(f"{path} cannot be read: permission denied") from None
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror or exc}") from None
    return path


def output_file(value: str | os.PathLike[str]) -> Path:
    """A file to write: not a directory, in an existing directory that can be written."""
    path = Path(value).expanduser()
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory; give a file name to write")
    parent = path.parent
    if not parent.exists():
        raise InvalidInput(f"cannot write {path}: directory {parent} does not exist")
    if not parent.is_dir():
        raise InvalidInput(f"cannot write {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInput(f"cannot write {path}: directory {parent} is not writable")
    return path


def storage_dirs(location: Path, user_dir: Path) -> None:
    """ConfigError unless STORAGE_LOCATION and the user's directory are (or can become)
    directories: neither may be an existing file, nor lie under one."""
    if location.exists() and not location.is_dir():
        raise ConfigError(
            f"STORAGE_LOCATION={location} is a file, not a directory: point STORAGE_LOCATION "
            "(or --storage) at a directory"
        )
    if user_dir.exists() and not user_dir.is_dir():
        raise ConfigError(
            f"{user_dir} is a file, but it must be the directory holding the memory of user "
            f"{user_dir.name!r}: move the file away or choose another STORAGE_LOCATION"
        )
    ancestor = location
    while not ancestor.exists() and ancestor.parent != ancestor:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(
            f"STORAGE_LOCATION={location} cannot be created: {ancestor} is a file, not a "
            f"directory; {STORAGE_FIX}"
        )
    unwritable = unwritable_storage(user_dir)
    if unwritable is not None:
        path, why = unwritable
        raise ConfigError(f"STORAGE_LOCATION={location}: {path} {why}; {STORAGE_FIX}")


#: What to do about a store that cannot be written.
STORAGE_FIX = (
    "point STORAGE_LOCATION (or --storage) at a directory this user can write, or make "
    "that path writable"
)


def unwritable_storage(user_dir: Path) -> tuple[Path, str] | None:
    """The first path of the store in ``user_dir`` this process cannot write (the
    directory, the files in it, or, before it exists, the nearest existing ancestor
    where it would be created) and why; None when all can be written."""
    target = user_dir
    while not target.exists() and target.parent != target:
        target = target.parent
    paths = [target]
    if target == user_dir and user_dir.is_dir():
        try:
            paths += sorted(p for p in user_dir.iterdir() if p.is_file())  # the store's files
        except OSError as exc:
            return user_dir, f"cannot be read ({exc.strerror or exc})"
    for path in paths:
        if not os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0)):
            return path, _why_unwritable(path)
    return None


def _why_unwritable(path: Path) -> str:
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs on Windows
        read_only = False
    return "is on a read-only file system" if read_only else "is not writable by this user"
