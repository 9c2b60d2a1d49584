"""The memory web page (``smriti.webui``) over plain HTTP, against real stores: the
Starlette app in this process on a real Kùzu engine, driven by Starlette's TestClient.

The local page (``smriti ui``'s one user, a one-time token) and a team server's page
(API keys checked by the MCP endpoint's own verifier, each user's memory opened by
``UserMemories``) are both covered: sessions and cookie flags, escaping of hostile
memories, the Content-Security-Policy, CSRF tokens and Origin checks on every POST,
another user's memory by id (404), and every page and change doing what it says.
The browser-driven tests are in test_webui_browser.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from smriti.audit import AuditLog
from smriti.auth.keys import KeyStore, keys_file
from smriti.config import Settings
from smriti.engine import Engine
from smriti.owner.service import LocalService
from smriti.requests import StoreRequest
from smriti.webui.access import LocalAccess, TeamAccess
from smriti.webui.app import UI, build_app
from smriti.webui.render import CSP
from smriti.webui.sessions import COOKIE, SessionStore

from .conftest import TEST_BACKEND, plugin_manager

SITE = "http://127.0.0.1:5000"
HOSTILE = '<script>window.pwned=1</script> <img src=x onerror="window.pwned=2"> & "quoted"'


def store(engine: Engine, text: str, **options: Any) -> str:
    request = StoreRequest.parse(text, max_chars=100_000, **options)
    return str(engine.store(request).to_dict()["id"])


class Browser:
    """A TestClient with its own cookie (sent by hand: a Secure cookie over plain
    http would be dropped by the client's jar) and the page's CSRF token."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.cookie = ""
        self.csrf = ""

    def get(self, path: str, **options: Any) -> Any:
        answer = self.client.get(path, headers=self._headers(), follow_redirects=False, **options)
        found = re.search(r'name="csrf" value="([^"]+)"', answer.text)
        if found:
            self.csrf = found.group(1)
        return answer

    def post(
        self, path: str, data: dict[str, Any], origin: str | None = SITE, csrf: bool = True
    ) -> Any:
        headers = self._headers()
        if origin is not None:
            headers["origin"] = origin
        form = {"csrf": self.csrf, **data} if csrf else data
        return self.client.post(path, data=form, headers=headers, follow_redirects=False)

    def take_cookie(self, answer: Any) -> str:
        header = answer.headers["set-cookie"]
        self.cookie = header.split(";", 1)[0]
        return str(header)

    def _headers(self) -> dict[str, str]:
        return {"cookie": self.cookie} if self.cookie else {}


# -- the local page (smriti ui) ----------------------------------------------------------


@pytest.fixture
def local(engine: Engine) -> Iterator[tuple[Browser, UI, Engine]]:
    sessions = SessionStore()
    ui = UI(LocalAccess(LocalService(engine)), sessions)
    with TestClient(build_app(ui), base_url=SITE) as client:
        browser = Browser(client)
        opened = browser.get(f"/ui/?token={sessions.one_time_token(engine.user)}")
        assert opened.status_code == 303 and opened.headers["location"] == "/ui/"
        browser.take_cookie(opened)
        yield browser, ui, engine


def test_the_one_time_token_opens_one_session(engine: Engine) -> None:
    sessions = SessionStore()
    ui = UI(LocalAccess(LocalService(engine)), sessions)
    client = TestClient(build_app(ui), base_url=SITE)
    token = sessions.one_time_token(engine.user)
    assert client.get("/ui/list", follow_redirects=False).status_code == 401
    opened = client.get(f"/ui/?token={token}", follow_redirects=False)
    cookie = opened.headers["set-cookie"].lower()
    assert opened.status_code == 303 and cookie.startswith(f"{COOKIE}=")
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
    assert "secure" not in cookie  # loopback, plain http
    again = TestClient(build_app(ui), base_url=SITE).get(f"/ui/?token={token}")
    assert again.status_code == 403 and "used already" in again.text
    assert client.get("/ui/list", follow_redirects=False).status_code == 200


def test_every_page_answers_with_the_security_headers(local: Any) -> None:
    browser, _, engine = local
    key = store(engine, "the bees swarmed in May", tags="bees")
    for path in ("/ui/", "/ui/?q=bees", "/ui/list", f"/ui/memory/{key}", "/ui/tidy",
                 "/ui/graph", "/ui/clusters", "/ui/stats", f"/ui/memory/{key}/forget"):  # fmt: skip
        answer = browser.get(path)
        assert answer.status_code == 200, (path, answer.text[:500])
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "same-origin"
        # no inline script: every script element loads a file, but the graph's data
        inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", answer.text)
        assert inline in ([], ['<script type="application/json" id="graph-data">']), path
    assert "script-src 'self'" in CSP and "'unsafe-inline'" not in CSP


def test_a_hostile_memory_is_shown_as_text(local: Any) -> None:
    browser, _, engine = local
    key = store(engine, HOSTILE, tags="<b>tag</b>")
    escaped = "&lt;img src=x onerror=&#34;window.pwned=2&#34;&gt;"
    for path in (f"/ui/memory/{key}", "/ui/list", "/ui/?q=pwned+img", f"/ui/memory/{key}/forget"):
        text = browser.get(path).text
        assert "<img" not in text and "<script>window" not in text and "<b>tag" not in text
        assert escaped in text or "&lt;script&gt;window.pwned=1" in text, path
    graph = browser.get(f"/ui/graph?around={key}").text
    data = re.search(r'id="graph-data">(.*?)</script>', graph, re.S)
    assert data and "<" not in data.group(1) and "\\u003cimg" in data.group(1)


def test_posts_need_the_csrf_token_and_this_origin(local: Any) -> None:
    browser, _, engine = local
    key = store(engine, "the spare key is under the blue pot")
    browser.get(f"/ui/memory/{key}/forget")
    confirm = {"confirm": "yes"}
    refused = [
        browser.post(f"/ui/memory/{key}/forget", confirm, csrf=False),
        browser.post(f"/ui/memory/{key}/forget", {**confirm, "csrf": "x" * 43}, csrf=False),
        browser.post(f"/ui/memory/{key}/forget", confirm, origin=None),
        browser.post(f"/ui/memory/{key}/forget", confirm, origin="https://evil.example"),
        browser.post(f"/ui/memory/{key}/forget", confirm, origin="null"),
    ]
    assert [r.status_code for r in refused] == [403] * 5
    assert "CSRF" in refused[0].text and "Origin" in refused[2].text
    assert engine.get(key)["memory"]["id"] == key  # nothing happened
    unconfirmed = browser.post(f"/ui/memory/{key}/forget", {})
    assert unconfirmed.status_code == 400 and "confirmation" in unconfirmed.text
    done = browser.post(f"/ui/memory/{key}/forget", confirm)
    assert done.status_code == 303 and done.headers["location"] == "/ui/list?done=forgotten"
    assert browser.get(f"/ui/memory/{key}").status_code == 404


def test_search_shows_match_type_and_hop_with_filters(local: Any) -> None:
    browser, _, engine = local
    bees = store(engine, "Alice keeps bees behind the orchard", tags="garden")
    store(engine, "the orchard apples ripen in September", tags="garden,fruit")
    page = browser.get("/ui/?q=bees&limit=5").text
    rows = re.findall(r'<tr class="result" data-id="([^"]+)">(.*?)</tr>', page, re.S)
    assert rows and rows[0][0] == bees
    assert re.search(r'class="match match-(cue|vector|lexical|association)"', rows[0][1])
    assert re.search(r'<td class="num">\d</td>', rows[0][1])  # the hop
    only_fruit = browser.get("/ui/?q=orchard&tags=fruit").text
    assert bees not in only_fruit
    bad = browser.get("/ui/?q=bees&since=not-a-date")
    assert bad.status_code == 400 and "since" in bad.text


def rows(page: str) -> set[str]:
    return set(re.findall(r'<tr class="result" data-id="([^"]+)">', page))


def test_the_list_pages_with_a_cursor_and_filters(local: Any) -> None:
    browser, _, engine = local
    keys = {
        store(engine, f"note number {i} about topic {i % 3}", tags=f"t{i % 3}") for i in range(55)
    }
    first = browser.get("/ui/list").text
    shown = set(re.findall(r'<tr class="result" data-id="([^"]+)">', first))
    assert len(shown) == 50
    following = re.search(r'href="(/ui/list\?[^"]*cursor=[^"]+)" id="next"', first)
    assert following, first[-800:]
    rest = set(
        re.findall(r'data-id="([^"]+)"', browser.get(following.group(1).replace("&amp;", "&")).text)
    )
    assert shown | rest == keys and not shown & rest
    tagged = set(
        re.findall(r'<tr class="result" data-id="([^"]+)">', browser.get("/ui/list?tags=t1").text)
    )
    assert len(tagged) == 18 and tagged < keys


def test_correct_update_and_the_version_chain(local: Any) -> None:
    browser, _, engine = local
    key = store(engine, "the meeting is on Tuesday", tags="work")
    browser.get(f"/ui/memory/{key}")
    corrected = browser.post(f"/ui/memory/{key}/correct", {"content": "the meeting is on Thursday"})
    assert corrected.status_code == 303, corrected.text
    new = corrected.headers["location"].split("/ui/memory/")[1].split("?")[0]
    page = browser.get(corrected.headers["location"]).text
    assert "Corrected" in page and "the meeting is on Thursday" in page
    versions = re.findall(r'<li class="version[^"]*" data-id="([^"]+)">', page)
    assert versions == [key, new]
    assert engine.get(new)["memory"]["origin"] == "user"
    old = browser.get(f"/ui/memory/{key}").text
    assert 'id="superseded"' in old and 'id="correct-form"' not in old
    updated = browser.post(
        f"/ui/memory/{new}/update", {"tags": "work, calendar", "importance": "0.9"}
    )
    assert updated.status_code == 303
    memory = engine.get(new)["memory"]
    assert memory["tags"] == ["work", "calendar"] and memory["importance"] == 0.9
    bad = browser.post(f"/ui/memory/{new}/update", {"tags": "x", "importance": "7"})
    assert bad.status_code == 400 and "importance" in bad.text


def test_merge_folds_a_group_into_the_memory_kept(local: Any) -> None:
    browser, _, engine = local
    a = store(engine, "Bob's birthday is on the 3rd of March, he likes chocolate cake")
    b = store(engine, "Bob's birthday is on the 3rd of March and he likes chocolate cake")
    tidy = browser.get("/ui/tidy?threshold=0.8").text
    group = re.search(r'<form method="post" action="/ui/merge".*?</form>', tidy, re.S)
    assert group and a in group.group(0) and b in group.group(0), tidy[:3000]
    merged = browser.post("/ui/merge", {"keep": a, "merge": [a, b]})
    assert merged.status_code == 303 and merged.headers["location"].startswith(f"/ui/memory/{a}")
    page = browser.get(merged.headers["location"]).text
    assert "Merged" in page and re.search(rf'id="merged">.*{b}', page, re.S)
    assert engine.get(b)["memory"]["superseded_by"] == a
    nothing = browser.post("/ui/merge", {"keep": a})
    assert nothing.status_code == 400


def test_unknown_ids_and_bad_values_are_pages_not_tracebacks(local: Any) -> None:
    browser, _, _ = local
    assert browser.get("/ui/memory/no-such-memory").status_code == 404
    assert browser.get("/ui/graph?limit=abc").status_code == 400
    assert browser.get("/ui/graph?around=no-such-memory").status_code == 404
    assert browser.get("/ui/tidy?threshold=high").status_code == 400
    assert browser.get("/ui/static/../app.py").status_code == 404
    assert browser.client.get("/ui/static/nothing.js").status_code == 404


# -- a team server's page ------------------------------------------------------------------


class Team:
    def __init__(
        self, settings: Settings, keys: dict[str, str], memories: Any, audit: Path
    ) -> None:
        self.settings, self.keys, self.memories, self.audit = settings, keys, memories, audit

    def audited(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text().splitlines()]


@pytest.fixture
def team(tmp_path: Path, engine_factory: Any) -> Iterator[tuple[Team, TestClient]]:
    from smriti.auth.verifier import build_verifier
    from smriti.mcp_server.users import UserMemories

    env = {
        "STORAGE_LOCATION": str(tmp_path / "store"),
        "DB_TYPE": TEST_BACKEND,
        "SMRITI_AUTH": "keys",
        "SMRITI_OWNER": "off",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_SYNC_INTERVAL": "0",
    }
    settings = Settings.from_env(env)
    made = KeyStore(keys_file(settings))
    keys = {u: made.create(u) for u in ("alice", "bob")}
    keys["reader"] = made.create("alice", ("read",))

    def opener(settings: Settings, kind: str, **options: Any) -> LocalService:
        engine = Engine.from_settings(settings, pm=plugin_manager())
        engine.open()
        return LocalService(engine)

    verifier = build_verifier(settings, "http://127.0.0.1:5000/mcp")
    memories = UserMemories(settings, verifier.scopes, opener=opener)
    audit = AuditLog(tmp_path / "audit.jsonl")
    ui = UI(TeamAccess(memories, verifier, audit), secure=True)
    with TestClient(build_app(ui), base_url=SITE) as client:
        yield Team(settings, keys, memories, tmp_path / "audit.jsonl"), client
    memories.close()
    audit.close()


def sign_in(team: Team, client: TestClient, user: str) -> Browser:
    browser = Browser(client)
    answer = browser.post("/ui/signin", {"key": team.keys[user]}, csrf=False)
    assert answer.status_code == 303, answer.text
    cookie = browser.take_cookie(answer).lower()
    assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie
    return browser


def test_team_sign_in_with_a_key(team: Any) -> None:
    server, client = team
    assert client.get("/ui/", follow_redirects=False).headers["location"] == "/ui/signin"
    anyone = Browser(client)
    assert anyone.post("/ui/signin", {"key": "smriti_nope_nope"}, csrf=False).status_code == 401
    assert server.audited()[-1]["event"] == "refused"
    assert anyone.post("/ui/signin", {"key": ""}, csrf=False).status_code == 401
    no_origin = anyone.post("/ui/signin", {"key": server.keys["alice"]}, origin=None, csrf=False)
    assert no_origin.status_code == 403 and "set-cookie" not in no_origin.headers
    alice = sign_in(server, client, "alice")
    page = alice.get("/ui/list")
    assert page.status_code == 200 and '<span id="user">alice</span>' in page.text


def test_a_second_user_sees_none_of_the_first_users_memories(team: Any) -> None:
    server, client = team
    alice, bob = sign_in(server, client, "alice"), sign_in(server, client, "bob")
    secret = "the locker code of alice is 4711 zebra"

    async def put() -> str:
        async with server.memories.use_token(await _token(server, "alice"), "write") as svc:
            return str(svc.run(StoreRequest.parse(secret, max_chars=1000))["id"])

    # stored in alice's memory as her MCP calls reach it
    key = client.portal.call(put)  # type: ignore[union-attr]
    assert secret in alice.get(f"/ui/memory/{key}").text
    assert "zebra" not in bob.get("/ui/list").text
    searched = bob.get("/ui/?q=locker+code+zebra").text
    assert "4711" not in searched and key not in searched and 'id="nothing"' in searched
    foreign = bob.get(f"/ui/memory/{key}")
    assert foreign.status_code == 404 and "zebra" not in foreign.text
    bob.get("/ui/")
    for action, form in (("forget", {"confirm": "yes"}), ("correct", {"content": "mine"}),
                         ("update", {"tags": "stolen"})):  # fmt: skip
        answer = bob.post(f"/ui/memory/{key}/{action}", form)
        assert answer.status_code == 404, (action, answer.text[:300])
    assert bob.post("/ui/merge", {"keep": key, "merge": key + "x"}).status_code == 404
    assert alice.get(f"/ui/memory/{key}").status_code == 200  # untouched
    # every request a page ran is in the audit log, as a tool call would be
    tried = [e for e in server.audited() if e.get("user") == "bob" and e["action"] == "forget"]
    assert tried == [
        {**tried[0], "tool": "web page", "memory_ids": [key], "outcome": "error"}
    ] and tried[0]["principal"].startswith("key:")


async def _token(server: Team, user: str) -> Any:
    from smriti.auth.verifier import build_verifier

    return await build_verifier(server.settings, "x").check(server.keys[user])


def test_a_read_only_key_cannot_change_and_a_revoked_key_signs_out(team: Any) -> None:
    server, client = team
    reader = sign_in(server, client, "reader")
    reader.get("/ui/")
    refused = reader.post("/ui/memory/whatever/forget", {"confirm": "yes"})
    assert refused.status_code == 403 and "may not change" in refused.text
    alice = sign_in(server, client, "alice")
    assert alice.get("/ui/list").status_code == 200
    store_keys = KeyStore(keys_file(server.settings))
    key_id = server.keys["alice"].split("_")[1]
    store_keys.revoke(key_id)
    gone = alice.get("/ui/list")
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/signin"
    assert alice.get("/ui/list").status_code == 303  # the session is closed


def test_smriti_ui_on_a_busy_port_says_so(tmp_path: Path) -> None:
    import socket
    import subprocess

    from smriti.testing.owner_load import load_env, smriti_command

    env = load_env(tmp_path / "store", "alice", HOME=str(tmp_path / "home"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = str(busy.getsockname()[1])
        done = subprocess.run(
            [smriti_command(), "ui", "--port", port, "--no-browser"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr
    bad = subprocess.run(
        [smriti_command(), "ui", "--port", "70000"], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "65535" in bad.stderr


def test_counts_show_growth_month_by_month(local: Any) -> None:
    from smriti.engine.growth import growth

    browser, _, engine = local
    for day in ("2026-01-15", "2026-01-20", "2026-03-02", "2026-03-09", "2026-03-30"):
        store(engine, f"the garden diary entry of {day}", occurred_at=day)
    expected = [
        {"month": "2026-01", "added": 2, "total": 2},
        {"month": "2026-03", "added": 3, "total": 5},
    ]
    assert growth(engine, page=2)["months"] == expected  # read in pages of 2
    page = browser.get("/ui/stats").text
    assert re.search(r'id="count-engrams">5<', page)
    rows = re.findall(r"<tr><td>(\d{4}-\d\d)</td><td class=\"num\">(\d+)</td>", page)
    assert rows == [("2026-03", "3"), ("2026-01", "2")]
    assert page.count('class="bar"') == 2


def test_tidy_shows_possible_conflicts_to_merge(local: Any) -> None:
    browser, _, engine = local
    paris = store(engine, "I live in Paris")
    berlin = store(engine, "I now live in Berlin, I left Paris")
    store(engine, "Bananas are yellow")
    page = browser.get("/ui/tidy").text
    section = page.split('id="conflicts"', 1)[1].split("</section>", 1)[0]
    ids = re.findall(r'<tr data-id="([^"]+)">', section)
    assert ids == [berlin, paris]  # the newest first, kept by default
    done = browser.post("/ui/merge", {"keep": berlin, "merge": paris})
    assert done.status_code == 303
    assert engine.get(paris)["memory"]["superseded_by"] == berlin
    assert 'id="no-conflicts"' in browser.get("/ui/tidy").text


def test_team_sign_in_with_an_oauth_access_token(tmp_path: Path) -> None:
    from smriti.auth.principals import oauth_user
    from smriti.auth.verifier import build_verifier
    from smriti.mcp_server.users import UserMemories
    from smriti.testing.issuer import LocalIssuer

    issuer = LocalIssuer()
    resource = "http://127.0.0.1:5000/mcp"
    env = {
        "STORAGE_LOCATION": str(tmp_path / "store"), "DB_TYPE": TEST_BACKEND,
        "SMRITI_AUTH": "oauth", "SMRITI_OAUTH_ISSUER": issuer.url, "SMRITI_OWNER": "off",
        "CONSOLIDATION_INTERVAL": "0", "BACKUP_SYNC_INTERVAL": "0",
    }  # fmt: skip
    settings = Settings.from_env(env)

    def opener(settings: Settings, kind: str, **options: Any) -> LocalService:
        return LocalService(Engine.from_settings(settings, pm=plugin_manager()).open())

    verifier = build_verifier(settings, resource)
    memories = UserMemories(settings, verifier.scopes, opener=opener)
    try:
        with TestClient(build_app(UI(TeamAccess(memories, verifier))), base_url=SITE) as client:
            browser = Browser(client)
            other = issuer.token("https://elsewhere.example/mcp", "carol")
            assert browser.post("/ui/signin", {"key": other}, csrf=False).status_code == 401
            signed = browser.post(
                "/ui/signin", {"key": issuer.token(resource, "carol")}, csrf=False
            )
            assert signed.status_code == 303, signed.text
            browser.take_cookie(signed)
            page = browser.get("/ui/list")
            expected = oauth_user(issuer.url, "carol")  # namespaced by its issuer
            assert page.status_code == 200 and f'<span id="user">{expected}</span>' in page.text
    finally:
        memories.close()
        issuer.close()


def test_the_local_page_answers_only_its_own_host(engine: Engine) -> None:
    from smriti.webui.local import LocalGate

    sessions = SessionStore()
    gate = LocalGate(build_app(UI(LocalAccess(LocalService(engine)), sessions)), 5000)
    token = sessions.one_time_token(engine.user)
    for site in (SITE, "http://localhost:5000"):
        opened = TestClient(gate, base_url=site).get(f"/ui/?token={token}x")
        assert opened.status_code == 403 and "used already" in opened.text  # reached the page
    for host in ("evil.example", "127.0.0.1:5001", "evil.example:5000"):
        rebound = TestClient(gate, base_url=f"http://{host}").get(f"/ui/?token={token}")
        assert rebound.status_code in (400, 421), host  # refused before the page
    origin = {"origin": "http://evil.example"}
    crossed = TestClient(gate, base_url=SITE).post("/ui/signout", headers=origin)
    assert crossed.status_code == 403 and "Origin" in crossed.text
    assert sessions.redeem(token) is not None  # the token was never used by those


def test_unknown_pages_are_error_pages_with_the_headers(local: Any) -> None:
    browser, _, _ = local
    for answer, status in ((browser.get("/ui/nothing-here"), 404),
                           (browser.client.put("/ui/list"), 405)):  # fmt: skip
        assert answer.status_code == status
        assert answer.headers["content-security-policy"] == CSP and "<h1>" in answer.text
