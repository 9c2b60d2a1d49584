"""One process owns an embedded store; every other ``smriti`` process of the user
reaches it through that owner.

Embedded databases such as Kùzu admit one process per store, but a person runs several
MCP clients (each starting its own ``smriti``) and the CLI at once. The first of them
that needs the store starts an owner process (``smriti owner run``, detached); all of
them, the first included, talk to it over a Unix socket in the store directory (mode
0600, the peer's uid checked). The owner stops after ``SMRITI_OWNER_IDLE`` seconds
with nobody attached; when it dies, the next request starts another, and requests
whose answer was lost are sent again when that is harmless (see ``client``).

- ``service``: the memory interface the MCP tools and the CLI use, local or remote.
- ``ops``: the operations, shared by both.
- ``client``, ``server``, ``spawn``, ``protocol``, ``paths``: the owner and its wire.
"""

from smriti.owner.service import LocalService, Service, open_service, uses_owner

__all__ = ["LocalService", "Service", "open_service", "uses_owner"]
