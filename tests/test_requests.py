"""The typed requests (``smriti.requests``): checked once when built, carried through the
owner protocol as their wire form and rebuilt equal, and taken by the engine as they are
(a real store: the keyword convenience and the request give the same recall)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from smriti import requests
from smriti.config import Settings
from smriti.engine import Engine
from smriti.errors import InvalidInput
from smriti.owner import ops
from smriti.owner.service import LocalService
from smriti.requests import (
    CorrectRequest,
    ForgetRequest,
    MergeRequest,
    RecallRequest,
    Request,
    StoreRequest,
    UpdateRequest,
)

KEY = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({"STORAGE_LOCATION": str(tmp_path), "ACCESSING_USER": "alice"})


#: One request of every type, with fields away from their defaults where they have any.
SAMPLES: list[Request] = [
    RecallRequest.parse(
        "garden tomatoes",
        7,
        "search",
        "episodic",
        "garden, food",
        "all",
        "2025-03-01",
        "2025-04-01T09:30:00+02:00",
        True,
        None,
        "import:",
        max_limit=100,
    ),  # fmt: skip
    RecallRequest.parse(None, 3, "list", cursor="abc", origin="user", max_limit=100),
    StoreRequest.parse(
        "Ada keeps the spare keys in the blue jar",
        0.8,
        "home,keys",
        "chat",
        KEY,
        "2024-01-02",
        "user",
        "key:k1",
        max_chars=1000,
    ),  # fmt: skip
    requests.GetRequest.parse(KEY),
    CorrectRequest.parse(
        KEY, "The keys are in the red jar", 0.3, "home", OTHER, "agent", "key:k2", True
    ),  # fmt: skip
    requests.HistoryRequest.parse(KEY),
    UpdateRequest.parse(KEY, None, ""),
    requests.RelatedRequest.parse(KEY, 4),
    requests.DuplicatesRequest.parse(0.8, 5, 10),
    MergeRequest.parse(KEY, f"{OTHER}, {OTHER}"),
    ForgetRequest.parse(KEY, repeated=True),
    requests.PurgeRequest.parse(KEY),
    requests.StatsRequest(),
    requests.ConsolidateRequest(),
    requests.SyncRequest(),
    requests.ExportRequest.parse("/tmp/out.jsonl", "list"),
    requests.ImportRequest.parse("/tmp/in.jsonl", True),
    requests.ImportFromRequest.parse("mcp-memory", "/tmp/memory.jsonl", True),
    requests.ImportTextRequest.parse("mem0", '[{"memory": "Likes tea"}]', True),
    requests.ExportToRequest.parse("mcp-memory", "/tmp/memory.jsonl"),
    requests.HashRequest(),
    requests.ReembedRequest.parse(64, True),
    requests.GraphRequest.parse(3, KEY, 1, 50),
    requests.ClustersRequest(),
    requests.GrowthRequest(),
    requests.ConflictsRequest.parse(5),
    requests.DetailsRequest.parse(KEY),
]


def test_every_operation_has_a_sample() -> None:
    assert {type(r) for r in SAMPLES} == set(requests.REQUESTS.values())
    assert set(ops.HANDLERS) == set(requests.REQUESTS.values())


@pytest.mark.parametrize("request_", SAMPLES, ids=lambda r: type(r).__name__)
def test_the_wire_form_is_json_and_decodes_to_the_same_request(
    request_: Request, settings: Settings
) -> None:
    wire = json.loads(json.dumps(request_.to_wire()))
    assert requests.decode(request_.op, wire, settings) == request_


def test_parse_normalises_once_so_the_wire_carries_checked_values() -> None:
    recall = SAMPLES[0]
    assert isinstance(recall, RecallRequest)
    assert recall.tags == ("garden", "food")
    assert recall.since == datetime(2025, 3, 1, tzinfo=UTC)
    assert recall.until == datetime(2025, 4, 1, 7, 30, tzinfo=UTC)
    assert recall.to_wire()["until"] == "2025-04-01T07:30:00+00:00"
    assert MergeRequest.parse(KEY, f"{OTHER}, {OTHER}").memory_ids == (OTHER,)
    assert UpdateRequest.parse(KEY, None, "").tags == ()  # '' clears the tags


def test_a_request_without_a_query_lists_and_says_so() -> None:
    listed = RecallRequest.parse("   ", 5, "recall", max_limit=10)
    assert listed.query is None and listed.lists and listed.shown_mode == "list"
    asked = RecallRequest.parse("tomatoes", 5, "search", max_limit=10)
    assert not asked.lists and asked.shown_mode == "search"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"limit": 11}, "limit must be between 1 and 10, got 11"),
        ({"mode": "fuzzy"}, "mode must be one of recall, search, list, got 'fuzzy'"),
        ({"since": "2025-05-01", "until": "2025-04-01"}, "must be before until"),
        ({"since": "last tuesday"}, "since must be an ISO 8601 date or date-time"),
        ({"cursor": "abc"}, "cursor pages a list (mode=list or an empty query); drop it here"),
        ({"cursor": 5}, "cursor must be the next_cursor string of the previous list call"),
        ({"tag_match": "most"}, "tag_match must be 'any' or 'all', got 'most'"),
        ({"origin": "robots"}, "origin"),
    ],
)
def test_a_bad_recall_argument_is_refused_when_the_request_is_built(
    arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        RecallRequest.parse("tomatoes", **arguments, max_limit=10)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_a_bad_store_argument_is_refused_when_the_request_is_built() -> None:
    with pytest.raises(InvalidInput, match="over the limit of 10"):
        StoreRequest.parse("x" * 11, max_chars=10)
    with pytest.raises(InvalidInput, match="importance must be between 0.0 and 1.0"):
        StoreRequest.parse("x", 1.5, max_chars=10)
    with pytest.raises(InvalidInput, match="32 lower-case hex"):
        StoreRequest.parse("x", memory_id="../../etc", max_chars=10)
    with pytest.raises(InvalidInput, match="give importance and/or tags to update"):
        UpdateRequest.parse(KEY)


def test_the_owner_checks_what_arrives_and_ignores_keys_it_does_not_know(
    settings: Settings,
) -> None:
    with pytest.raises(InvalidInput, match="unknown operation 'drop_everything'"):
        requests.decode("drop_everything", {}, settings)
    with pytest.raises(InvalidInput, match="limit must be between 1 and 100"):
        requests.decode("recall", {"query": "x", "limit": 1000}, settings)
    sent_again = requests.decode("recall", {"query": "x", "repeated": True}, settings)
    assert sent_again == RecallRequest(query="x")


def test_the_engine_takes_the_request_as_the_keyword_convenience_builds_it(
    engine: Engine,
) -> None:
    for text in ("Tomatoes need water every morning", "The garden shed has a blue door",
                 "Compost the tomato leaves in autumn"):  # fmt: skip
        engine.store(text, tags="garden")
    asked = RecallRequest.parse(
        "tomato garden", limit=2, mode="search", max_limit=engine.settings.max_recall_limit
    )
    by_request = [r.engram.id for r in engine.recall(asked)]
    by_keywords = [r.engram.id for r in engine.recall("tomato garden", 2, "search")]
    assert len(by_request) == 2
    assert by_request == by_keywords


class _Recording(LocalService):
    """A LocalService that keeps what it was asked to send (then sends it)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.sent: list[Request] = []

    def send(self, request: Request, progress: object) -> object:
        self.sent.append(request)
        return super().send(request, progress)  # type: ignore[arg-type]


def test_a_service_gives_a_correction_its_id_before_it_is_sent(engine: Engine) -> None:
    # The id is fixed before the request leaves, so that a correction sent again to a
    # new owner (the first died before answering) makes one new version, not two.
    memory = _Recording(engine)
    stored = memory.run(StoreRequest("The backup runs at 2am"))
    done = memory.run(CorrectRequest(stored["id"], "The backup runs at 3am"))
    sent = memory.sent[-1]
    assert isinstance(sent, CorrectRequest) and sent.new_id is not None
    assert done["new_id"] == sent.new_id
    assert done["superseded"] == stored["id"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_tool_call_reaches_the_memory_as_one_typed_request(
    engine: Engine, anyio_backend: str
) -> None:
    from mcp.client import Client

    from smriti.mcp_server import build_server

    memory = _Recording(engine)
    async with Client(build_server(memory)) as client:
        arguments = {"query": "tomatoes", "limit": 3, "mode": " SEARCH ", "tags": "a, b",
                     "since": "2025-01-01", "include_superseded": "yes"}  # fmt: skip
        await client.call_tool("smriti_recall", arguments)
        await client.call_tool("smriti_manage", {"action": "Update", "memory_id": KEY,
                                                 "tags": ""})  # fmt: skip
    recall, update = memory.sent
    assert recall == RecallRequest(
        query="tomatoes", limit=3, mode="search", tags=("a", "b"),
        since=datetime(2025, 1, 1, tzinfo=UTC), include_superseded=True,
    )  # fmt: skip
    assert update == UpdateRequest(KEY, None, ())
