"""Recall and store while the embedding API is down (the fake OpenAI server, real client).

The embedder is the OpenAI-compatible one pointed at ``FakeOpenAI`` through
``EMBEDDING_BASE_URL`` (no LLM key: cues come from the heuristic extractor, so only the
embedder sees the outage). Each failure mode exhausts the embedder's retries for real:
HTTP 500, HTTP 429, a stall past the timeout, and a broken response body.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp.client import Client

from smriti.backend import Seek
from smriti.engine import Engine
from smriti.errors import ProviderError
from smriti.mcp_server import build_server
from smriti.testing.fake_openai import FakeOpenAI

EngineFactory = Callable[..., Engine]
MEMORIES = (
    "Priya prefers tabs over spaces in Go code",
    "The Lisbon office moved to Alcantara in March",
    "Ravi's cat Biscuit only eats tuna",
)
OUTAGE_ENV = {"EMBEDDING_MODEL": "fake-embed", "LLM_TIMEOUT": "0.3", "LLM_MAX_RETRIES": "1"}


def _fail_500(fake: FakeOpenAI) -> None:
    fake.fail_next(1000, status=500)


def _fail_429(fake: FakeOpenAI) -> None:
    fake.fail_next(1000, status=429, retry_after=0.01)


def _stall(fake: FakeOpenAI) -> None:
    fake.delay = 2.0  # past LLM_TIMEOUT=0.3 on every attempt


def _garbage(fake: FakeOpenAI) -> None:
    fake.malformed_next(1000, kind="http")


OUTAGES: dict[str, Callable[[FakeOpenAI], None]] = {
    "http-500": _fail_500,
    "http-429": _fail_429,
    "stall": _stall,
    "garbage": _garbage,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dims=32) as server:
        yield server


@pytest.fixture
def engine(engine_factory: EngineFactory, fake: FakeOpenAI) -> Engine:
    """An engine embedding through the fake server, with three memories stored."""
    opened = engine_factory(EMBEDDING_BASE_URL=fake.base_url, **OUTAGE_ENV)
    assert opened.embedder.name == "openai"
    opened.embedder.policy.backoff_base = 0.01  # type: ignore[attr-defined]
    for text in MEMORIES:
        opened.store(text)
    return opened


def _embedding_calls(fake: FakeOpenAI) -> int:
    return len(fake.requests_to("/embeddings"))


@pytest.mark.parametrize("outage", OUTAGES)
def test_recall_degrades_to_cues_and_lexical(engine: Engine, fake: FakeOpenAI, outage: str) -> None:
    before = _embedding_calls(fake)
    OUTAGES[outage](fake)
    results = engine.recall("Priya tabs", limit=3)
    assert _embedding_calls(fake) - before == 2  # the outage was real: both attempts failed
    assert results.degraded and "embedding provider is unavailable" in results.warning
    assert results[0].engram.content == MEMORIES[0]
    assert {r.match_type for r in results} <= {"cue", "lexical", "association", "context"}
    searched = engine.recall("Lisbon office", mode="search")
    assert searched.degraded
    assert [(r.engram.content, r.match_type) for r in searched][:1] == [(MEMORIES[1], "lexical")]


@pytest.mark.parametrize("outage", OUTAGES)
def test_store_fails_cleanly_and_stores_nothing(
    engine: Engine, fake: FakeOpenAI, outage: str
) -> None:
    OUTAGES[outage](fake)
    with pytest.raises(ProviderError, match=r"NOT stored.*Try again"):
        engine.store("Priya switched to spaces after all")
    assert engine.backend.count_engrams() == len(MEMORIES)
    assert engine.backend.seek(Seek(k=5, text="switched")).text == []


def test_recall_is_whole_again_after_the_outage(engine: Engine, fake: FakeOpenAI) -> None:
    _fail_500(fake)
    assert engine.recall("Priya tabs").degraded
    fake.reset()
    results = engine.recall("Priya tabs")
    assert not results.degraded and results.warning == ""
    assert results[0].engram.content == MEMORIES[0]
    assert not engine.recall("Priya tabs", mode="search").degraded


@pytest.mark.anyio
@pytest.mark.parametrize("outage", OUTAGES)
async def test_mcp_recall_flags_degraded_and_store_is_a_tool_error(
    engine: Engine, fake: FakeOpenAI, outage: str
) -> None:
    async with Client(build_server(engine)) as client:
        healthy = await client.call_tool("smriti_recall", {"query": "Ravi cat"})
        assert healthy.structured_content["degraded"] is False
        assert "warning" not in healthy.structured_content
        OUTAGES[outage](fake)
        recalled = await client.call_tool("smriti_recall", {"query": "Ravi cat"})
        assert not recalled.is_error, recalled
        data = recalled.structured_content
        assert data["degraded"] is True and "embedding" in data["warning"]
        assert data["results"][0]["content"] == MEMORIES[2]
        searched = await client.call_tool("smriti_recall", {"query": "cat", "mode": "search"})
        assert searched.structured_content["degraded"] is True
        assert searched.structured_content["results"][0]["match_type"] == "lexical"
        stored = await client.call_tool("smriti_store", {"content": "Biscuit now eats salmon"})
        assert stored.is_error
        assert "NOT stored" in stored.content[0].text and "Try again" in stored.content[0].text
        fake.reset()
        stats = await client.call_tool("smriti_manage", {"action": "stats"})
        assert stats.structured_content["stats"]["engrams"] == len(MEMORIES)


def test_cli_recall_json_is_flagged_and_store_exits_1(tmp_path: Path, fake: FakeOpenAI) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        "STORAGE_LOCATION": str(tmp_path / "store"),
        "ACCESSING_USER": "outage",
        "HOME": str(tmp_path / "home"),
        "BACKUP_TYPE": "none",
        "EMBEDDING_BASE_URL": fake.base_url,
        **OUTAGE_ENV,
    }

    def smriti(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "smriti", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    assert smriti("store", MEMORIES[0]).returncode == 0
    _fail_500(fake)
    recalled = smriti("recall", "Priya tabs", "--json")
    assert recalled.returncode == 0, recalled.stderr
    data = json.loads(recalled.stdout)
    assert data["degraded"] is True and data["warning"]
    assert [r["content"] for r in data["results"]] == [MEMORIES[0]]
    text = smriti("recall", "Priya tabs")
    assert text.returncode == 0 and "smriti: warning:" in text.stderr and "Priya" in text.stdout
    refused = smriti("store", "not while the API is down")
    assert refused.returncode == 1 and "smriti: error: the memory was NOT stored" in refused.stderr
    assert "Traceback" not in refused.stderr
    fake.reset()
    listed = json.loads(smriti("recall", "--json", "--limit", "10").stdout)
    assert [r["content"] for r in listed["results"]] == [MEMORIES[0]]
