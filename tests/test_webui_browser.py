"""The memory web page in a real browser: Debian's headless Chromium, driven over the
DevTools protocol (``smriti.testing.browser``), on the real ``smriti ui`` console
script (through the store's owner process) and the real ``smriti serve --transport
http`` with API keys.

A person's session: open the printed link, search, open a memory, correct it and see
the version chain, forget one after the confirmation, merge two near-duplicates; a
hostile memory stays text and runs nothing; every page runs without a script error
or a Content-Security-Policy violation. On a team server: sign in with a key, and a
second user sees none of the first one's memories and gets 404 for them by id.

Screenshots of the main views are written to ``SMRITI_UI_SCREENSHOTS`` (a directory;
``docs/images`` regenerates the documentation's) or to the test's temporary directory.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from smriti.requests import StoreRequest
from smriti.testing.browser import Browser
from smriti.testing.http_users import HttpServer, make_keys, user_env
from smriti.testing.owner_load import load_env, smriti_command

from .conftest import TEST_BACKEND
from .test_graph import chromium

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Debian's chromium")

HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"> & "quotes"'
MEMORIES = [
    ("Alice keeps two beehives at the end of the garden, behind the apple trees", "garden,bees"),
    ("The bees swarmed on the 14th of May; Alice caught the swarm in a spare hive", "bees"),
    ("Apple harvest: the Bramley tree gave 30 kg this year, mostly for cooking", "garden"),
    ("Alice prefers tabs over spaces and uses ruff to format Python", "coding"),
    ("The team standup is at 9:30 every weekday in the blue room", "work"),
    ("Project Orion ships its beta on the 2nd of March", "work,orion"),
    ("Bob's birthday is on the 3rd of March; he likes chocolate cake", "people"),
    ("Bob's birthday is the 3rd of March and he likes chocolate cake", "people"),
    ("Flight to Lisbon on the 12th of June, seat 14A, booking ref KX7Q2", "travel"),
    ("In Lisbon, try the pastel de nata at the bakery near Belem tower", "travel,food"),
    ("Alice is allergic to walnuts", "health"),
    ("Sourdough: feed the starter the night before, bake at 230 C for 40 minutes", "food"),
    ("The car's next service is due at 60,000 km", ""),
    ("Honey from the hives: 12 jars in August, labelled and stored in the cellar", "bees"),
    ("Orion's database migration must finish before the beta", "work,orion"),
    ("I live in Leeds", "home"),
    ("I now live in York, I left Leeds", "home"),
    (HOSTILE, "test"),
]


def shots_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("SMRITI_UI_SCREENSHOTS")
    path = Path(chosen) if chosen else tmp_path / "shots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def shoot(browser: Browser, where: Path, name: str) -> None:
    data = browser.screenshot(where / f"ui-{name}.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def clean(browser: Browser) -> None:
    """No script error, no console message, no CSP report on the pages so far."""
    assert browser.problems == [], browser.problems
    assert browser.evaluate("window.pwned") is None


@pytest.fixture
def ui_env(tmp_path: Path, engine_factory: Any) -> dict[str, str]:
    """A store with MEMORIES (consolidated: clusters), closed, and the env to reach it."""
    env = load_env(
        tmp_path / "store", "alice", HOME=str(tmp_path / "home"), DB_TYPE=TEST_BACKEND,
        SMRITI_OWNER_IDLE="2",
    )  # fmt: skip
    engine = engine_factory("alice", STORAGE_LOCATION=env["STORAGE_LOCATION"])
    for text, tags in MEMORIES:
        engine.store(StoreRequest.parse(text, tags=tags, max_chars=10_000))
    engine.consolidate()
    engine.close()
    return env


@pytest.fixture
def smriti_ui(ui_env: dict[str, str]) -> Iterator[str]:
    """``smriti ui --no-browser`` running; yields the URL it printed first."""
    proc = subprocess.Popen(
        [smriti_command(), "ui", "--no-browser"],
        env=ui_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "smriti ui printed nothing within 120 s"
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/ui/\?token=[\w-]{40,}", url), url
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert code == 0, proc.stderr.read() if proc.stderr else code


def test_a_session_in_the_browser(smriti_ui: str, tmp_path: Path) -> None:
    shots = shots_dir(tmp_path)
    site = smriti_ui.split("/ui/")[0]
    with Browser(chromium()) as browser:
        assert browser.goto(smriti_ui) == f"{site}/ui/"  # the token left the address bar
        assert browser.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
        # search
        browser.fill("#q", "bees swarm")
        browser.click("#search-form button[type=submit]")
        rows = browser.evaluate("[...document.querySelectorAll('tr.result')].length")
        assert rows >= 2 and "swarmed" in browser.text("#results")
        kinds = browser.evaluate("[...document.querySelectorAll('.match')].map(e => e.textContent)")
        assert len(kinds) == rows and "cue" in kinds  # each result says how it was found
        shoot(browser, shots, "search")
        # a memory, corrected: the version chain
        browser.click("tr.result a.memory-link")
        assert "swarm" in browser.text("#content")
        shoot(browser, shots, "memory")
        browser.fill("#correct-text", "The bees swarmed on the 15th of May; Alice caught them")
        browser.click("#correct")
        assert "Corrected" in browser.text("#done"), browser.evaluate("location.href")
        assert "15th of May" in browser.text("#content")
        versions = browser.evaluate("[...document.querySelectorAll('#versions li')].length")
        assert versions == 2 and "replaced" in browser.text("#versions")
        # forget, after the confirmation
        browser.click("#forget")
        assert "Forget this memory?" in browser.text("h1")
        gone = browser.evaluate("document.getElementById('memory') === null")
        assert gone
        browser.click("#confirm-forget")
        assert "Forgotten." in browser.text("#done")
        assert "15th of May" not in browser.text("#results")
        shoot(browser, shots, "list")
        clean(browser)


def test_merge_two_near_duplicates_in_the_browser(smriti_ui: str, tmp_path: Path) -> None:
    shots = shots_dir(tmp_path)
    site = smriti_ui.split("/ui/")[0]
    with Browser(chromium()) as browser:
        browser.goto(smriti_ui)
        browser.goto(f"{site}/ui/tidy?threshold=0.8")
        assert "York" in browser.text("#conflicts") and "Leeds" in browser.text("#conflicts")
        group = browser.text("form.group")
        assert group.count("birthday") == 2, browser.text()
        shoot(browser, shots, "tidy")
        browser.click("form.group button.merge")
        assert "Merged" in browser.text("#done")
        assert "birthday" in browser.text("#merged")
        browser.goto(f"{site}/ui/tidy?threshold=0.8")
        assert "birthday" not in browser.text("main")
        clean(browser)


def test_hostile_memory_graph_and_counts_in_the_browser(smriti_ui: str, tmp_path: Path) -> None:
    shots = shots_dir(tmp_path)
    site = smriti_ui.split("/ui/")[0]
    with Browser(chromium()) as browser:
        browser.goto(smriti_ui)
        browser.goto(f"{site}/ui/?q=pwned+onerror+img&mode=recall")
        browser.click("tr.result a.memory-link")
        assert browser.text("#content") == HOSTILE  # the text itself, shown as text
        assert browser.evaluate("document.querySelectorAll('main img, main script').length") == 0
        browser.goto(f"{site}/ui/graph")
        drawn = int(browser.evaluate("document.body.dataset.nodes"))
        assert drawn == len(MEMORIES) and browser.evaluate("document.body.dataset.ready") == "1"
        click = "new MouseEvent('click', {bubbles: true})"
        browser.evaluate(f"document.querySelector('circle.memory').dispatchEvent({click})")
        assert "/ui/memory/" in browser.evaluate("document.getElementById('d-open').href")
        shoot(browser, shots, "graph")
        browser.goto(f"{site}/ui/clusters")
        assert browser.evaluate("document.querySelectorAll('#clusters tbody tr').length") >= 1
        browser.goto(f"{site}/ui/stats")
        assert browser.text("#count-engrams") == str(len(MEMORIES))
        clean(browser)


# -- a team server ----------------------------------------------------------------------------


@pytest.fixture
def team_server(tmp_path: Path) -> Iterator[tuple[HttpServer, dict[str, str]]]:
    env = user_env(
        os.environ, tmp_path / "store", SMRITI_AUTH="keys", HOME=str(tmp_path / "home"),
        DB_TYPE=TEST_BACKEND,
    )  # fmt: skip
    keys = make_keys(Path(env["STORAGE_LOCATION"]) / ".api-keys.json", ["alice", "bob"])
    server = HttpServer(env, tmp_path / "server.log", host="0.0.0.0").start()
    try:
        yield server, keys
    finally:
        assert server.stop() == 0, server.text()


def test_team_users_sign_in_and_see_only_their_own(team_server: Any, tmp_path: Path) -> None:
    server, keys = team_server
    site = f"http://127.0.0.1:{server.port}"
    with Browser(chromium()) as alice:
        assert alice.goto(f"{site}/ui/").endswith("/ui/signin")
        alice.fill("#key", keys["alice"])
        alice.click("#signin")
        assert alice.text("#user") == "alice"
        note = "the blue notebook is in the zebra-4711 drawer"
        secret_id = _store_through_mcp(server, keys["alice"], note)
        alice.goto(f"{site}/ui/list")
        assert "zebra-4711" in alice.text("#results")
        shoot(alice, shots_dir(tmp_path), "signin-list")
        clean(alice)
    with Browser(chromium()) as bob:
        bob.goto(f"{site}/ui/")
        bob.fill("#key", keys["bob"])
        bob.click("#signin")
        assert bob.text("#user") == "bob"
        bob.goto(f"{site}/ui/list")
        assert "zebra" not in bob.text("main")
        bob.goto(f"{site}/ui/memory/{secret_id}")
        assert "Not found" in bob.text("h1") and "zebra" not in bob.text("main")
    # over plain HTTP: 404 by id for bob, the cookie's flags, no CSRF token -> 403
    plain = httpx2.Client(base_url=site, follow_redirects=False)
    signed = plain.post("/ui/signin", data={"key": keys["bob"]}, headers={"origin": site})
    cookie = signed.headers["set-cookie"]
    assert all(flag in cookie.lower() for flag in ("httponly", "samesite=strict", "secure"))
    headers = {"cookie": cookie.split(";")[0], "origin": site}
    assert plain.get(f"/ui/memory/{secret_id}", headers=headers).status_code == 404
    forged = plain.post(f"/ui/memory/{secret_id}/forget", data={"confirm": "yes"}, headers=headers)
    assert forged.status_code == 403
    elsewhere = {**headers, "origin": "https://evil.example"}
    assert plain.post("/ui/signin", data={"key": keys["bob"]}, headers=elsewhere).status_code == 403
    plain.close()


def _store_through_mcp(server: HttpServer, key: str, text: str) -> str:
    """Store ``text`` with the MCP tool over the server's endpoint (the real client)."""
    import anyio

    from smriti.testing.http_users import client

    async def run() -> str:
        async with client(server.url, key) as session:
            done = await session.call_tool("smriti_store", {"content": text})
            assert not done.is_error, done
            return str(done.structured_content["id"])

    return anyio.run(run)
