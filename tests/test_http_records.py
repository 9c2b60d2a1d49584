"""Who a caller is and what is written about them, against the real ``smriti serve
--transport http`` with API keys and OAuth (a local JWKS issuer): namespaced
principals, a full session at ``LOG_LEVEL=debug`` that leaves no secret in any log
line, and the audit log.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import string
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from smriti.auth.principals import oauth_user
from smriti.testing.http_users import HttpServer, client, make_keys, user_env
from smriti.testing.issuer import LocalIssuer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Team:
    def __init__(self, server: HttpServer, issuer: LocalIssuer, keys: dict, root: Path) -> None:
        self.server, self.issuer, self.keys, self.root = server, issuer, keys, root
        self.url = server.url
        self.principals = root / "principals.json"
        self.audit = root / "audit" / "access.jsonl"

    def token(self, subject: str) -> str:
        return self.issuer.token(self.url, subject)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    root = tmp_path_factory.mktemp("team")
    issuer = LocalIssuer()
    (root / "principals.json").write_text("{}")
    server = HttpServer({}, root / "server.log")
    server.env = user_env(
        os.environ,
        root / "store",
        HOME=str(root),
        SMRITI_AUTH="keys+oauth",
        SMRITI_OWNER="off",
        SMRITI_OAUTH_ISSUER=issuer.url,
        SMRITI_PUBLIC_URL=server.url,
        SMRITI_PRINCIPALS_FILE=str(root / "principals.json"),
        SMRITI_AUDIT_LOG=str(root / "audit" / "access.jsonl"),
        LOG_LEVEL="debug",
    )
    keys = make_keys(root / "store" / ".api-keys.json", ["bob"])
    server.start()
    try:
        yield Team(server, issuer, keys, root)
    finally:
        code = server.stop()
        issuer.close()
        assert code == 0, server.text()


@pytest.mark.anyio
async def test_an_oauth_subject_named_like_a_key_user_has_its_own_memory(team: Team) -> None:
    async with client(team.url, team.keys["bob"]) as bob:
        done = await bob.call_tool("smriti_store", {"content": "bob keeps the boat keys"})
        assert not done.is_error, done
    async with client(team.url, team.token("bob")) as other:
        found = await other.call_tool("smriti_recall", {"query": "boat keys"})
        assert found.structured_content["count"] == 0  # not the key user's memory
        stats = await other.call_tool("smriti_manage", {"action": "stats"})
        user = stats.structured_content["stats"]["user"]
    assert user == oauth_user(team.issuer.url, "bob") and user.startswith("oauth-")
    assert user.endswith("-bob")


@pytest.mark.anyio
async def test_the_operator_maps_a_subject_to_a_key_user(team: Team) -> None:
    """A mapping in SMRITI_PRINCIPALS_FILE (read again while the server runs) makes an
    OAuth subject the same person as a key user."""
    async with client(team.url, team.keys["bob"]) as bob:
        await bob.call_tool("smriti_store", {"content": "bob parks in bay seven"})
    team.principals.write_text(json.dumps({team.issuer.url: {"bob-at-idp": "bob"}}))
    async with client(team.url, team.token("bob-at-idp")) as mapped:
        found = await mapped.call_tool("smriti_recall", {"query": "bay seven"})
        assert found.structured_content["count"] >= 1


def test_unmapped_names_differ_by_issuer_and_by_case() -> None:
    one = oauth_user("https://a.example", "bob")
    assert one != oauth_user("https://b.example", "bob")
    assert one != oauth_user("https://a.example", "Bob")
    assert one == oauth_user("https://a.example", "bob")


def test_a_key_user_cannot_take_an_oauth_name(tmp_path: Path) -> None:
    from smriti.errors import InvalidInput

    with pytest.raises(InvalidInput, match="SMRITI_PRINCIPALS_FILE"):
        make_keys(tmp_path / "keys.json", [oauth_user("https://a.example", "bob")])


@pytest.mark.anyio
async def test_a_debug_session_leaves_no_secret_in_any_log_line(team: Team) -> None:
    """Store, recall, get, correct and forget a memory holding a fake AWS key, with a
    key and a JWT, plus refused tokens, all at LOG_LEVEL=debug: neither the secret nor
    any credential nor the memory's words appear in the server log or the audit log."""
    secret = "AKIA" + "".join(secrets.choice(string.ascii_uppercase) for _ in range(16))
    content = f"the deploy credential is {secret} on the staging box quokkaridge"
    jwt_token = team.token("erin")
    for token in (team.keys["bob"], jwt_token):
        async with client(team.url, token) as session:
            stored = await session.call_tool("smriti_store", {"content": content})
            assert not stored.is_error, stored
            memory_id = stored.structured_content["id"]
            found = await session.call_tool("smriti_recall", {"query": secret})
            assert secret in json.dumps(found.structured_content)  # it was really there
            await session.call_tool("smriti_manage", {"action": "get", "memory_id": memory_id})
            fixed = await session.call_tool(
                "smriti_manage",
                {"action": "correct", "memory_id": memory_id, "content": content + " (old)"},
            )
            new_id = fixed.structured_content["corrected"]["new_id"]
            await session.call_tool("smriti_manage", {"action": "forget", "memory_id": new_id})
            bad = await session.call_tool("smriti_manage", {"action": f"x{secret}"})
            assert bad.is_error
    wrong_key = team.keys["bob"][:-6] + "AAAAAA"
    for token in (wrong_key, jwt_token + "x"):
        refused = httpx2.post(team.url, json={}, headers={"Authorization": f"Bearer {token}"})
        assert refused.status_code == 401
    log = team.server.text()
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    sdk_debug = [r for r in records if r.get("logger", "").startswith("mcp.")]
    assert any(r["level"] == "debug" for r in sdk_debug)  # the SDK's debug output was on
    key_secret = team.keys["bob"].split("_", 2)[2]
    for needle in (
        secret,
        key_secret,
        wrong_key,
        jwt_token,
        jwt_token.split(".")[2],
        "quokkaridge",
    ):
        hits = [line for line in log.splitlines() if needle in line]
        assert not hits, (needle[:12], hits[:3])
        assert needle not in team.audit.read_text()


@pytest.mark.anyio
async def test_the_audit_log_records_who_did_what_without_content(team: Team) -> None:
    async with client(team.url, team.keys["bob"]) as bob:
        stored = await bob.call_tool("smriti_store", {"content": "bob waters the fern weekly"})
        memory_id = stored.structured_content["id"]
        await bob.call_tool("smriti_recall", {"query": "fern"})
        await bob.call_tool("smriti_manage", {"action": "get", "memory_id": memory_id})
    httpx2.post(
        team.url, json={}, headers={"Authorization": "Bearer smriti_abc123_nope" + "x" * 20}
    )
    assert stat.S_IMODE(team.audit.stat().st_mode) == 0o600
    text = team.audit.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    key_id = team.keys["bob"].split("_")[1]
    mine = [
        e
        for e in lines
        if e.get("principal") == f"key:{key_id}" and memory_id in e.get("memory_ids", [])
    ]
    assert [e["action"] for e in mine] == ["store", "recall", "get"], mine
    for entry in mine:
        assert entry["user"] == "bob" and entry["outcome"] == "ok"
        assert entry["client"].startswith("127.0.0.1:") and entry["time"]
    refused = [
        e for e in lines if e.get("event") == "refused" and e.get("principal") == "key:abc123"
    ]
    assert refused and refused[-1]["status"] == 401 and refused[-1]["client"]
    assert "fern" not in text and "waters" not in text
