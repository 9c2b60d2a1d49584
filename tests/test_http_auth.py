"""The real ``smriti serve --transport http`` with authentication, driven by the MCP SDK
client and by plain HTTP: API keys made and revoked with the real ``smriti keys`` CLI,
OAuth JWTs signed by a test issuer whose metadata and JWKS a fixture serves on
127.0.0.1, hostile Host and Origin headers on a 0.0.0.0 bind, and the JSON-RPC errors
for unknown prompts and protocol versions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.shared.exceptions import MCPError

from smriti.auth.principals import oauth_user
from smriti.config import Settings
from smriti.errors import ConfigError
from smriti.mcp_server.http import plan_http
from smriti.testing.http_users import HttpServer, client, smriti_command, user_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [smriti_command(), *args], env=env, capture_output=True, text=True, timeout=60
    )


def post(url: str, body: Any, token: str | None = None, **headers: str) -> httpx2.Response:
    sent = {"Accept": ACCEPT, "Content-Type": "application/json", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx2.post(url, json=body, headers=sent, timeout=30)


def call(name: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


# --- API keys, on a 0.0.0.0 bind ---------------------------------------------------------


class KeyServer:
    def __init__(self, server: HttpServer, env: dict[str, str], keys: dict[str, str]) -> None:
        self.server, self.env, self.keys = server, env, keys
        self.url = server.url


@pytest.fixture(scope="module")
def key_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyServer]:
    root = tmp_path_factory.mktemp("keys")
    env = user_env(
        os.environ,
        root / "store",
        SMRITI_AUTH="keys",
        SMRITI_OWNER="off",  # owners are covered by test_http_users; here only auth
        SMRITI_ALLOWED_HOSTS="memory.example",
        SMRITI_ALLOWED_ORIGINS="https://app.example",
        HOME=str(root / "home"),
    )
    keys = {}
    for name, extra in (("alice", []), ("reader", ["--scope", "read"]), ("gone", [])):
        made = cli(env, "keys", "create", name, *extra)
        assert made.returncode == 0, made.stderr
        keys[name] = made.stdout.strip()
    server = HttpServer(env, root / "server.log", host="0.0.0.0").start()
    try:
        yield KeyServer(server, env, keys)
    finally:
        assert server.stop() == 0, server.text()


def test_keys_are_stored_hashed_in_a_private_file(key_server: KeyServer) -> None:
    path = Path(key_server.env["STORAGE_LOCATION"]) / ".api-keys.json"
    assert path.stat().st_mode & 0o777 == 0o600
    text = path.read_text()
    for key in key_server.keys.values():
        assert key.split("_", 2)[2] not in text  # no secret, only digests
    listed = json.loads(cli(key_server.env, "keys", "list", "--json").stdout)
    assert {k["user"]: k["scopes"] for k in listed["keys"]} == {
        "alice": ["read", "write"],
        "reader": ["read"],
        "gone": ["read", "write"],
    }
    assert all(k["key"] not in json.dumps(listed) for k in listed["keys"] if "key" in k)


def test_no_token_and_a_bad_token_are_401_with_www_authenticate(key_server: KeyServer) -> None:
    for token in (None, "smriti_0000_notarealsecretnotarealsecret", "garbage"):
        answer = post(key_server.url, INITIALIZE, token)
        assert answer.status_code == 401, answer.text
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert "resource_metadata" not in challenge  # keys only: no authorization server


@pytest.mark.anyio
async def test_the_sdk_client_without_a_token_is_refused(key_server: KeyServer) -> None:
    with pytest.raises(Exception) as caught:  # noqa: B017 - the SDK wraps it in groups
        async with client(key_server.url) as session:
            await session.call_tool("smriti_recall", {"query": "x"})
    assert "unauthorized" in repr(caught.value) or "401" in repr(caught.value)


@pytest.mark.anyio
async def test_a_key_reaches_its_users_memory(key_server: KeyServer) -> None:
    async with client(key_server.url, key_server.keys["alice"]) as session:
        stored = await session.call_tool("smriti_store", {"content": "alice keeps bees"})
        assert not stored.is_error, stored
        found = await session.call_tool("smriti_recall", {"query": "bees"})
        assert [r["id"] for r in found.structured_content["results"]] == [
            stored.structured_content["id"]
        ]
        stats = await session.call_tool("smriti_manage", {"action": "stats"})
        assert stats.structured_content["stats"]["user"] == "alice"
    store_dir = Path(key_server.env["STORAGE_LOCATION"]) / "alice"
    assert store_dir.is_dir()


@pytest.mark.anyio
async def test_a_read_key_reads_and_is_refused_writes_with_403(key_server: KeyServer) -> None:
    token = key_server.keys["reader"]
    for arguments in (
        call("smriti_store", {"content": "not allowed"}),
        call("smriti_manage", {"action": "forget", "memory_id": "x"}),
        call("smriti_manage", {"action": "consolidate"}),
    ):
        answer = post(key_server.url, arguments, token)
        assert answer.status_code == 403, answer.text
        challenge = answer.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="smriti:write"' in challenge
        assert answer.json()["id"] == 7
    async with client(key_server.url, token) as session:
        found = await session.call_tool("smriti_recall", {"query": "bees"})
        assert not found.is_error and found.structured_content["count"] == 0  # own memory
        stats = await session.call_tool("smriti_manage", {"action": "stats"})
        assert stats.structured_content["stats"]["user"] == "reader"
        with pytest.raises(MCPError, match="insufficient_scope|smriti:write"):
            await session.call_tool("smriti_store", {"content": "not allowed"})
        assert (await session.call_tool("smriti_manage", {"action": "stats"})).structured_content[
            "stats"
        ]["engrams"] == 0


@pytest.mark.anyio
async def test_a_revoked_key_is_refused_at_once_in_a_running_server(
    key_server: KeyServer,
) -> None:
    token = key_server.keys["gone"]
    key_id = token.split("_")[1]
    async with client(key_server.url, token) as session:
        assert not (await session.call_tool("smriti_store", {"content": "before"})).is_error
        revoked = cli(key_server.env, "keys", "revoke", key_id)
        assert revoked.returncode == 0, revoked.stderr
        with pytest.raises(MCPError, match="revoked"):
            await session.call_tool("smriti_recall", {"query": "before"})
    answer = post(key_server.url, INITIALIZE, token)
    assert answer.status_code == 401 and "revoked" in answer.headers["www-authenticate"]
    assert cli(key_server.env, "keys", "revoke", "no-such-key").returncode == 1


def test_hostile_host_and_origin_are_refused_on_a_0000_bind(key_server: KeyServer) -> None:
    token = key_server.keys["alice"]
    assert post(key_server.url, INITIALIZE, token, Host="evil.example").status_code == 421
    assert post(key_server.url, INITIALIZE, None, Host="evil.example").status_code == 421
    hostile = post(key_server.url, INITIALIZE, token, Origin="http://evil.example")
    assert hostile.status_code == 403 and "Origin" in hostile.text
    named = post(key_server.url, INITIALIZE, token, Host="memory.example:8443")
    assert named.status_code == 200, named.text
    app = post(key_server.url, INITIALIZE, token, Origin="https://app.example")
    assert app.status_code == 200, app.text


def test_unknown_prompt_and_protocol_version_are_json_rpc_errors(key_server: KeyServer) -> None:
    token = key_server.keys["alice"]
    opened = post(key_server.url, INITIALIZE, token)
    session = {"mcp-session-id": opened.headers["mcp-session-id"]}
    version = {"mcp-protocol-version": "2025-06-18"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert post(key_server.url, note, token, **session, **version).status_code == 202
    ask = {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "nope"}}
    answer = post(key_server.url, ask, token, **session, **version)
    message = _sse_message(answer.text)
    assert (
        message["error"]["code"] == -32602 and "smriti_system_prompt" in message["error"]["message"]
    )
    bad = post(key_server.url, INITIALIZE, token, **{"mcp-protocol-version": "1999-01-01"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32022
    time.sleep(0.2)
    log = key_server.server.text()
    assert "Traceback" not in log and "Unknown prompt" not in log


def _sse_message(text: str) -> dict[str, Any]:
    if text.lstrip().startswith("{"):
        return json.loads(text)
    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


def test_a_public_bind_without_authentication_is_refused(tmp_path: Path) -> None:
    env = user_env(os.environ, tmp_path / "store", HOME=str(tmp_path))
    done = subprocess.run(
        [smriti_command(), "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "without authentication" in done.stderr and "smriti keys create" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "store").exists()  # refused before anything was opened


@pytest.mark.parametrize("host", ["::", "192.0.2.1", "memory.example", "0.0.0.0"])
def test_every_non_loopback_bind_needs_authentication(tmp_path: Path, host: str) -> None:
    settings = Settings.from_env(user_env({}, tmp_path / "store"))
    with pytest.raises(ConfigError, match="without authentication"):
        plan_http(settings, host, 8000)
    for loopback in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        plan = plan_http(settings, loopback, 8000)
        assert plan.verifier is None and plan.security.enable_dns_rebinding_protection


def test_allowed_hosts_and_origins_come_from_the_settings(tmp_path: Path) -> None:
    env = user_env(
        {},
        tmp_path / "store",
        SMRITI_AUTH="keys",
        SMRITI_ALLOWED_HOSTS="memory.example, proxy.internal:8080",
        SMRITI_PUBLIC_URL="https://mem.example.org/mcp",
    )
    security = plan_http(Settings.from_env(env), "0.0.0.0", 8000).security
    assert security.enable_dns_rebinding_protection
    for allowed in ("memory.example", "memory.example:*", "proxy.internal:8080", "mem.example.org"):
        assert allowed in security.allowed_hosts
    assert "proxy.internal:*" not in security.allowed_hosts
    assert "https://mem.example.org" in security.allowed_origins


# --- OAuth: a test issuer on 127.0.0.1 -------------------------------------------------


class Issuer:
    """An OAuth issuer: RFC 8414 metadata and a JWKS over HTTP, and tokens it signs."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.requests: list[str] = []
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                issuer.requests.append(self.path)
                if self.path == "/.well-known/oauth-authorization-server":
                    body = {
                        "issuer": issuer.url,
                        "jwks_uri": f"{issuer.url}/jwks.json",
                        "authorization_endpoint": f"{issuer.url}/authorize",
                        "token_endpoint": f"{issuer.url}/token",
                        "response_types_supported": ["code"],
                    }
                elif self.path == "/jwks.json":
                    public = jwt.algorithms.RSAAlgorithm.to_jwk(
                        issuer.key.public_key(), as_dict=True
                    )
                    body = {"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def token(self, audience: str, signer: Any = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": self.url,
            "aud": audience,
            "sub": "carol",
            "iat": now,
            "exp": now + 600,
            "scope": "smriti:read smriti:write",
            "client_id": "test-client",
            **claims,
        }
        return jwt.encode(payload, signer or self.key, algorithm="RS256", headers={"kid": "k1"})

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class OAuthServer:
    def __init__(self, server: HttpServer, issuer: Issuer, resource: str) -> None:
        self.server, self.issuer, self.resource = server, issuer, resource
        self.url = server.url


@pytest.fixture(scope="module")
def oauth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthServer]:
    root = tmp_path_factory.mktemp("oauth")
    issuer = Issuer()
    server = HttpServer({}, root / "server.log")
    resource = f"http://127.0.0.1:{server.port}/mcp"
    server.env = user_env(
        os.environ,
        root / "store",
        SMRITI_AUTH="oauth",
        SMRITI_OWNER="off",
        SMRITI_OAUTH_ISSUER=issuer.url,
        SMRITI_PUBLIC_URL=resource,
        HOME=str(root / "home"),
    )
    server.start()
    try:
        yield OAuthServer(server, issuer, resource)
    finally:
        code = server.stop()
        issuer.close()
        assert code == 0, server.text()


def test_protected_resource_metadata_is_served(oauth_server: OAuthServer) -> None:
    base = oauth_server.url.removesuffix("/mcp")
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        meta = httpx2.get(base + path, timeout=30)
        assert meta.status_code == 200, meta.text
        data = meta.json()
        assert data["resource"] == oauth_server.resource
        assert data["authorization_servers"] == [oauth_server.issuer.url]
        assert set(data["scopes_supported"]) == {"smriti:read", "smriti:write"}


def test_401_points_to_the_resource_metadata(oauth_server: OAuthServer) -> None:
    answer = post(oauth_server.url, INITIALIZE)
    assert answer.status_code == 401
    expected = oauth_server.url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{expected}"' in answer.headers["www-authenticate"]


@pytest.mark.anyio
async def test_a_valid_jwt_is_its_subjects_memory(oauth_server: OAuthServer) -> None:
    token = oauth_server.issuer.token(oauth_server.resource)
    async with client(oauth_server.url, token) as session:
        stored = await session.call_tool("smriti_store", {"content": "carol flies kites"})
        assert not stored.is_error, stored
        stats = await session.call_tool("smriti_manage", {"action": "stats"})
        # an OAuth subject's memory is namespaced by its issuer (smriti.auth.principals)
        expected = oauth_user(oauth_server.issuer.url, "carol")
        assert stats.structured_content["stats"]["user"] == expected
    other = oauth_server.issuer.token(oauth_server.resource, sub="dave")
    async with client(oauth_server.url, other) as session:
        found = await session.call_tool("smriti_recall", {"query": "kites"})
        assert found.structured_content["count"] == 0  # carol's memory is not dave's
    assert "/.well-known/oauth-authorization-server" in oauth_server.issuer.requests


@pytest.mark.parametrize(
    ("case", "claims", "reason"),
    [
        ("expired", {"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "expired"),
        ("another audience", {"aud": "https://other.example/mcp"}, "another audience"),
        ("another issuer", {"iss": "https://evil.example"}, "another issuer"),
        ("bad subject", {"sub": "../../etc"}, "not a valid user name"),
        ("foreign key", {"signer": "other"}, "invalid"),
    ],
)
def test_a_refused_jwt_is_401(
    oauth_server: OAuthServer, case: str, claims: dict[str, Any], reason: str
) -> None:
    issuer = oauth_server.issuer
    if claims.get("signer") == "other":
        claims = {**claims, "signer": issuer.other}
    token = issuer.token(oauth_server.resource, **claims)
    answer = post(oauth_server.url, INITIALIZE, token)
    assert answer.status_code == 401, (case, answer.text)
    assert reason in answer.headers["www-authenticate"], answer.headers["www-authenticate"]


def test_a_shared_secret_token_is_refused(oauth_server: OAuthServer) -> None:
    now = int(time.time())
    claims = {"iss": oauth_server.issuer.url, "aud": oauth_server.resource, "sub": "carol"}
    forged = jwt.encode({**claims, "exp": now + 600}, "x" * 32, algorithm="HS256")
    assert post(oauth_server.url, INITIALIZE, forged).status_code == 401


@pytest.mark.anyio
async def test_a_read_scope_jwt_writing_is_403(oauth_server: OAuthServer) -> None:
    token = oauth_server.issuer.token(oauth_server.resource, scope="smriti:read", sub="erin")
    answer = post(oauth_server.url, call("smriti_store", {"content": "x"}), token)
    assert answer.status_code == 403
    assert 'scope="smriti:write"' in answer.headers["www-authenticate"]
    async with client(oauth_server.url, token) as session:
        assert not (await session.call_tool("smriti_recall", {"query": "x"})).is_error
    none = oauth_server.issuer.token(oauth_server.resource, scope="profile", sub="erin")
    assert post(oauth_server.url, INITIALIZE, none).status_code == 403
