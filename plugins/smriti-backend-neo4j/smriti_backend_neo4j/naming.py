"""Safe Neo4j database names for the ``database`` isolation mode."""

from __future__ import annotations

import hashlib
import re

PREFIX = "smriti-"
MAX_LENGTH = 63  # Neo4j database names are 3-63 characters
_VALID = re.compile(r"^[a-z][a-z0-9.-]{2,62}$")


def database_name_for(user: str) -> str:
    """The database that holds ``user``'s memories: ``smriti-<user>``.

    Neo4j names allow only lower-case ASCII letters, digits, ``.`` and ``-``. A user
    name that had to change to fit (upper case, ``_``, non-ASCII, too long) gets a hash
    suffix of the original, so ``Alice`` and ``alice`` never share a database.
    """
    cleaned = re.sub(r"[^a-z0-9.-]", "-", user.lower())
    name = PREFIX + cleaned
    if cleaned != user or len(name) > MAX_LENGTH:
        digest = hashlib.sha256(user.encode("utf-8")).hexdigest()[:10]
        name = f"{name[: MAX_LENGTH - len(digest) - 1].rstrip('.-')}-{digest}"
    if not _VALID.fullmatch(name):  # defensive: never hand Neo4j an unchecked name
        raise ValueError(f"cannot derive a Neo4j database name from user {user!r}")
    return name
