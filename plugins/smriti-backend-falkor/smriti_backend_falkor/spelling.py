"""Memories an older Smriti stored under another spelling of the user's name.

User names are now canonical (``smriti.config.canonical_user``: NFKC, case-folded), so
the user an older version kept as ``Alice`` is ``alice``. Their memories carry the old
spelling (the tenant property in a shared graph, or the graph name ``Alice_smriti``),
and opening ``alice`` would silently start an empty memory beside them. The backend
refuses instead, naming the old spelling and the one statement that moves the data;
it never renames a tenant or graph by itself, since the server may be shared by
processes of an older version still writing under the old spelling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from smriti import ConfigError

if TYPE_CHECKING:
    from smriti_backend_falkor.backend import FalkorBackend

#: Every user with memories has SmritiMeta nodes (a few each): a cheap place to look.
OTHER_TENANTS = (
    "MATCH (m:SmritiMeta) WHERE m.user <> $user AND toLower(m.user) = $user RETURN DISTINCT m.user"
)


def refuse_other_spellings(backend: FalkorBackend, client: object) -> None:
    """ConfigError when the server holds this user's memories under another spelling.
    Called before the backend creates anything (an index would create the graph)."""
    names = {str(n) for n in client.list_graphs()}  # type: ignore[attr-defined]
    if not backend.multi_tenant:
        _refuse_other_graphs(backend, names)
    if backend.graph_name not in names:
        return  # a new graph: nobody's memories yet
    # Every node carries its user, in a graph of its own too: a renamed graph still
    # holds the old spelling until the statement below moves it.
    rows = backend._run(OTHER_TENANTS, read=True)
    others = sorted(str(row[0]) for row in rows)
    if others:
        raise ConfigError(
            f"the FalkorDB graph {backend.graph_name!r} holds memories of "
            f"{', '.join(map(repr, others))}, which is user {backend.user!r} now that "
            f"user names are case-insensitive; move them once (with no Smriti running "
            f'for them): GRAPH.QUERY {backend.graph_name} "MATCH (n) WHERE n.user = '
            f"'{others[0]}' SET n.user = '{backend.user}'\" (if {backend.user!r} has "
            "memories too, export both with `smriti export` and import one with --merge)"
        )


def _refuse_other_graphs(backend: FalkorBackend, names: set[str]) -> None:
    others = sorted(n for n in names if n != backend.graph_name and n.lower() == backend.graph_name)
    if not others:
        return
    both = (
        f" (a graph {backend.graph_name!r} exists too: merge them with `smriti export` "
        "and `smriti import --merge`)"
        if backend.graph_name in names
        else ""
    )
    raise ConfigError(
        f"FalkorDB holds the graph {others[0]!r}, made for user {backend.user!r} under "
        "another spelling before user names were case-insensitive; rename it once (with "
        f"no Smriti running for it): RENAME {others[0]} {backend.graph_name}, then open "
        f"again for the statement that moves its memories to {backend.user!r}{both}"
    )
