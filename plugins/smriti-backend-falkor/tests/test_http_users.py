"""Many users in one ``smriti serve --transport http`` process on a real FalkorDB server
(tenant isolation: every user's nodes in one graph, every query scoped to its user).

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

from .conftest import drop_graphs

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_twenty_users_at_once_on_falkordb_tenant_mode(
    falkor_addr: str, tmp_path: Path
) -> None:
    graph = f"smriti_http_{uuid.uuid4().hex[:10]}"
    env = user_env(
        os.environ,
        tmp_path / "store",
        HOME=str(tmp_path),
        DB_TYPE="falkordb",
        FALKOR_ADDR=falkor_addr,
        FALKOR_GRAPH=graph,
        FALKOR_ISOLATION="tenant",
    )
    try:
        figures = await many_users(env, tmp_path, "falkordb")
    finally:
        drop_graphs(falkor_addr, {graph})
    print(f"\nfalkordb: {figures}")
    assert figures["calls"] == 20 * 50 and figures["errors"] == 0, figures
    assert figures["leaks"] == 0 and figures["lost_writes"] == 0, figures
