"""Secrets never stored, end to end: the real ``smriti`` console script over stdio with
the MCP SDK client, on the embedded Kùzu default, through its owner process.

After the server and its owner stop, no file under the store, no export and no line of
the captured logs holds any of the fake secrets' bytes. A control run with
``SMRITI_SECRETS=allow`` finds the same bytes with the same search, so the search can
fail.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.testing.fake_secrets import example
from smriti.testing.owner_load import smriti_command

from .test_stdio import server_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX owner process")

KINDS = ("aws-access-key", "github-token", "openai-key", "private-key", "url-password",
         "password", "card-number", "jwt")  # fmt: skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env(tmp_path: Path, mode: str) -> dict[str, str]:
    return {**server_env(tmp_path), "SMRITI_SECRETS": mode, "SMRITI_OWNER_IDLE": "60"}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [smriti_command(), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done


def _git_objects(repo: Path) -> bytes:
    """Every object of a git repository, decompressed (packs and loose objects are
    zlib-compressed, so a byte search of its files would find nothing)."""
    done = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"],
        cwd=repo, capture_output=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout


def _holding(root: Path, needles: list[bytes]) -> dict[str, list[int]]:
    """Every file under ``root`` (binary too) holding any needle: path -> needle numbers."""
    found: dict[str, list[int]] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            hits = [i for i, needle in enumerate(needles) if needle in data]
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


async def _session(env: dict[str, str], errlog: Path, calls: list[tuple[str, dict]]) -> list[Any]:
    params = StdioServerParameters(command=smriti_command(), args=[], env=env)
    with errlog.open("a") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]


def _fakes() -> tuple[str, list[str]]:
    rng = random.Random("stdio")
    made = [example(kind, rng) for kind in KINDS]
    text = "Ops notes for the deploy. " + " ".join(sentence for sentence, _ in made)
    return text, [secret for _, secret in made]


@pytest.mark.anyio
async def test_secrets_reach_no_file_export_backup_or_log(tmp_path: Path) -> None:
    remote = tmp_path / "backup.git"
    subprocess.run(
        ["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)], check=True
    )
    env = {**_env(tmp_path, "redact"), "BACKUP_TYPE": "git", "GIT_BASE_URL": str(remote),
           "BACKUP_SYNC_INTERVAL": "0"}  # fmt: skip
    text, fakes = _fakes()
    tag = example("aws-access-key", random.Random("tag"))[1]
    fakes.append(tag)
    private = "my passport number is X1234567"
    stderr = tmp_path / "stderr.log"
    stored, recalled, refused, synced = await _session(env, stderr, [
        ("smriti_store", {"content": f"{text} <private>{private}</private>",
                          "tags": f"ops,{tag}", "source": "chat"}),
        ("smriti_recall", {"query": "ops notes deploy", "limit": 5}),
        ("smriti_store", {"content": "<PRIVATE>only this\nand this"}),
        ("smriti_manage", {"action": "sync"}),
    ])  # fmt: skip
    assert not stored.is_error, stored
    kinds = {r["kind"] for r in stored.structured_content["redacted"]}
    assert kinds == {*KINDS, "private"}
    shown = json.dumps(recalled.structured_content)
    assert stored.structured_content["id"] in shown and "[redacted:github-token]" in shown
    assert refused.is_error and "only <private> text" in refused.content[0].text
    assert not synced.is_error, synced
    export = tmp_path / "export.jsonl"
    _cli(env, "export", str(export))
    _cli(env, "owner", "stop")
    needles = [s.encode() for s in [*fakes, private]]
    assert _holding(tmp_path / "store", needles) == {}
    exported = export.read_bytes()
    assert b"[redacted:private-key]" in exported
    assert not [n for n in needles if n in exported]
    pushed = _git_objects(remote)
    assert b"[redacted:github-token]" in pushed  # the memory is in the backup's history
    assert not [n for n in needles if n in pushed]
    working_copies = [p.parent for p in (tmp_path / "store").rglob(".git")]
    assert working_copies and not [n for c in working_copies for n in needles
                                   if n in _git_objects(c)]  # fmt: skip
    logs = stderr.read_bytes()
    assert b"serving" in logs and not [n for n in needles if n in logs]


@pytest.mark.anyio
async def test_refuse_stores_nothing_and_allow_is_found_by_the_same_search(
    tmp_path: Path,
) -> None:
    text, fakes = _fakes()
    refuse_env = _env(tmp_path / "refuse", "refuse")
    refused, listed = await _session(refuse_env, tmp_path / "refuse.log", [
        ("smriti_store", {"content": text}),
        ("smriti_recall", {"mode": "list"}),
    ])  # fmt: skip
    assert refused.is_error
    message = refused.content[0].text
    assert "nothing was stored" in message and "github-token" in message
    assert not [f for f in fakes if f in message]
    assert listed.structured_content["count"] == 0
    _cli(refuse_env, "owner", "stop")

    allow_env = _env(tmp_path / "allow", "allow")
    (kept,) = await _session(allow_env, tmp_path / "allow.log", [
        ("smriti_store", {"content": text}),
    ])  # fmt: skip
    assert not kept.is_error and kept.structured_content["redacted"] == []
    _cli(allow_env, "owner", "stop")
    found = _holding(tmp_path / "allow" / "store", [fakes[1].encode()])
    assert found, "the search finds a secret that was stored"
