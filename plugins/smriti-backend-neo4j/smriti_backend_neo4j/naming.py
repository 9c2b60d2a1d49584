"""Safe, distinct Neo4j database names for the ``database`` isolation mode.

Smriti user names are 1-64 characters of ``[A-Za-z0-9._-]``; Neo4j database names are
3-63 characters of ``[a-z0-9.-]`` starting with a letter. No mapping can be one-to-one
on every user name (there are more 64-character user names than 63-character database
names), so names that cannot be kept as they are carry a hash of the exact user name:

- a *plain* user name (only ``[a-z0-9.-]``, short enough, and not ending like a hashed
  name) maps to ``smriti-<user>``: distinct plain names give distinct databases;
- every other name maps to ``smriti-<readable>-<hash>``: ``<readable>`` is the name in
  lower case with each run of other characters turned into ``-`` (for people reading a
  database list), and ``<hash>`` is 24 hex digits (96 bits) of SHA-256 of the exact user
  name, so two such names share a database only if SHA-256 collides on 96 bits.

The two forms never meet: every hashed name ends in ``-`` and 24 hex digits, and a user
name that ends that way is not plain, so it is hashed too.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "smriti-"
MAX_LENGTH = 63  # Neo4j database names are 3-63 characters
HASH_CHARS = 24
_PLAIN = re.compile(r"[a-z0-9][a-z0-9.-]*")
_HASHED_TAIL = re.compile(rf"-[0-9a-f]{{{HASH_CHARS}}}$")
_VALID = re.compile(r"^[a-z][a-z0-9.-]{2,62}$")


def database_name_for(user: str) -> str:
    """The database that holds ``user``'s memories (see the module docstring)."""
    name = PREFIX + user
    if not (_PLAIN.fullmatch(user) and len(name) <= MAX_LENGTH and not _HASHED_TAIL.search(name)):
        name = _hashed_name(user)
    if not _VALID.fullmatch(name):  # defensive: never hand Neo4j an unchecked name
        raise ValueError(f"cannot derive a Neo4j database name from user {user!r}")
    return name


def _hashed_name(user: str) -> str:
    digest = hashlib.sha256(user.encode("utf-8")).hexdigest()[:HASH_CHARS]
    room = MAX_LENGTH - len(PREFIX) - len(digest) - 1
    readable = re.sub(r"[^a-z0-9]+", "-", user.lower())[:room].strip("-")
    return f"{PREFIX}{readable}-{digest}" if readable else f"{PREFIX}{digest}"
