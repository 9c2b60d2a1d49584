"""Many users in one ``smriti serve --transport http`` process on a real Neo4j server
(tenant isolation: every user's nodes in one database, every query scoped to its user).

The real console script, the real SDK client over streamable HTTP, one API key per
user: 20 users x 50 mixed calls at once, with every returned id checked against the
ids its user stored (``smriti.testing.http_users``).
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from smriti.testing.http_users import many_users, user_env

from .conftest import ServerInfo, wipe

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_twenty_users_at_once_on_neo4j_tenant_mode(
    neo4j_server: ServerInfo, tmp_path: Path
) -> None:
    wipe(neo4j_server)
    env = user_env(
        os.environ,
        tmp_path / "store",
        HOME=str(tmp_path),
        DB_TYPE="neo4j",
        NEO4J_URI=neo4j_server.uri,
        NEO4J_USERNAME=neo4j_server.username,
        NEO4J_PASSWORD=neo4j_server.password,
        NEO4J_ISOLATION="tenant",
    )
    figures = await many_users(env, tmp_path, "neo4j", prefix=f"n{uuid.uuid4().hex[:6]}-")
    print(f"\nneo4j: {figures}")
    assert figures["calls"] == 20 * 50 and figures["errors"] == 0, figures
    assert figures["leaks"] == 0 and figures["lost_writes"] == 0, figures
