"""Memories an older Smriti stored under another spelling of the user's name.

User names are now canonical (``smriti.config.canonical_user``: NFKC, case-folded), so
the tenant an older version kept as ``Alice`` is user ``alice``. Opening ``alice``
would silently start an empty memory beside the old one; the backend refuses instead,
naming the old spelling and the statement that moves its nodes. It never moves them by
itself: processes of an older version may still be writing under the old spelling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import ConfigError

if TYPE_CHECKING:
    from smriti_backend_neo4j.backend import Neo4jBackend

#: Every user with memories has a few SmritiMeta nodes: a small set to look through.
OTHER_TENANTS = (
    "MATCH (m:SmritiMeta) WHERE m.user <> $user AND toLower(m.user) = $user "
    "RETURN DISTINCT m.user AS user"
)


def refuse_other_spellings(backend: Neo4jBackend) -> None:
    """ConfigError when this database holds the user's memories under another spelling."""
    others = sorted(str(record["user"]) for record in backend._read(OTHER_TENANTS))
    if not others:
        return
    raise ConfigError(
        f"the Neo4j database {backend.database!r} holds memories of "
        f"{', '.join(map(repr, others))}, which is user {backend.user!r} now that user "
        "names are case-insensitive; move them once (with no Smriti running for them): "
        f"\"MATCH (n) WHERE n.user = '{others[0]}' CALL (n) {{ SET n.user = "
        f"'{backend.user}' }} IN TRANSACTIONS\" (if {backend.user!r} has memories too, "
        "export both with `smriti export` and import one with --merge)"
    )
