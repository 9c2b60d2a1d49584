"""The import readers on sample files in each tool's own format (tests/data/importers/).

Each sample is built from the format the tool writes (the version is named in the
reader's docstring) and holds the awkward cases: records to skip, bad records that must
be reported by line or file while the good ones are read, links between records.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from smriti.errors import InvalidInput
from smriti.importers import (
    READERS,
    Imported,
    Rejected,
    basic_memory,
    claude_code,
    mcp_memory_service,
    mem0,
)
from smriti.testing.console import console_env
from smriti.testing.console import json_ok as _ok
from smriti.testing.console import run as _smriti

DATA = Path(__file__).parent / "data" / "importers"


def _split(records: object) -> tuple[list[Imported], list[Rejected]]:
    items = list(records)  # type: ignore[call-overload]
    return [r for r in items if isinstance(r, Imported)], [
        r for r in items if isinstance(r, Rejected)
    ]


# --- claude-code -----------------------------------------------------------------


def test_claude_code_reads_only_what_the_user_typed() -> None:
    good, bad = _split(claude_code.read(DATA / "claude-code-session.jsonl"))
    assert [g.content for g in good] == [
        "The tide gauge CSVs from the harbour office use semicolons, not commas. "
        "Always parse them with sep=';'.",
        "Also: my name is Asha and I review every PR on Fridays.",
        "Use the staging bucket s3://tide-staging for test uploads.",
    ]
    # tool results, meta entries, slash and shell commands, the sub-agent's prompt, the
    # interruption marker: none of them
    skipped = ("csv.reader", "Caveat", "<bash-", "gauges.csv", "interrupted", "/clear")
    assert not any(word in g.content for g in good for word in skipped)
    assert good[0].occurred_at == datetime(2026, 1, 20, 11, 58, 3, 120000, tzinfo=UTC)
    assert [(b.where, b.reason) for b in bad] == [
        ("line 10", "not a JSON object"),
        ("line 11", "timestamp 'yesterday' is not an ISO 8601 time"),
    ]


def test_claude_code_turns_follow_each_other_in_order() -> None:
    good, _ = _split(claude_code.read(DATA / "claude-code-session.jsonl"))
    assert good[0].links == ()
    assert good[1].links == ((good[0].key, "follows"),)
    assert good[2].links == ((good[1].key, "follows"),)
    # the keys are the transcript's own ids: the same on every read
    again, _ = _split(claude_code.read(DATA / "claude-code-session.jsonl"))
    assert [g.key for g in again] == [g.key for g in good]


def test_claude_code_reads_a_projects_folder(tmp_path: Path) -> None:
    project = tmp_path / "-home-asha-code-tide"
    project.mkdir()
    (project / "s1.jsonl").write_bytes((DATA / "claude-code-session.jsonl").read_bytes())
    (project / "notes.jsonl").write_text('{"name": "not a transcript"}\n')
    good, bad = _split(claude_code.read(tmp_path))
    assert len(good) == 3
    assert bad[0].where == str(Path("-home-asha-code-tide") / "notes.jsonl")
    assert "is not a Claude Code transcript" in bad[0].reason


@pytest.mark.parametrize("text", ["hello, this is prose\n", '["a", "list"]\n', ""])
def test_claude_code_refuses_a_file_that_is_not_a_transcript(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=r"a Claude Code transcript: JSON Lines") as caught:
        list(claude_code.read(path))
    assert "\n" not in str(caught.value)


def test_every_reader_is_registered() -> None:
    assert READERS["claude-code"] is claude_code.read
    assert READERS["basic-memory"] is basic_memory.read
    assert READERS["mem0"] is mem0.read
    assert READERS["mcp-memory-service"] is mcp_memory_service.read


# --- basic-memory ----------------------------------------------------------------


def _basic_memory() -> tuple[dict[str, Imported], list[Rejected]]:
    good, bad = _split(basic_memory.read(DATA / "basic-memory"))
    return {g.key: g for g in good}, bad


def test_basic_memory_note_becomes_a_memory_with_its_relations() -> None:
    notes, _ = _basic_memory()
    coffee = notes["note:coffee brewing methods"]
    assert "Notes from the weekend cupping" in coffee.content
    assert "Pour over" not in coffee.content  # observations are memories of their own
    assert coffee.tags == ("coffee", "brewing", "note")
    assert coffee.cues == ("Coffee Brewing Methods", "note")
    assert coffee.occurred_at == datetime(2025, 3, 2, 9, 15, tzinfo=UTC)
    # explicit relations keep their type (a quoted type may hold spaces); a wikilink in
    # prose links_to; a target is found by title or by permalink ([[grinder-settings]])
    assert coffee.links == (
        ("note:ravi menon", "links_to"),
        ("note:coffee bean origins", "relates_to"),
        ("note:grinder settings", "requires"),
        ("note:ravi menon", "brewed with"),
    )


def test_basic_memory_observations_carry_category_and_tags() -> None:
    notes, _ = _basic_memory()
    first = notes["note:coffee brewing methods#observation1"]
    assert first.content == "Pour over brings out the clarity of light roasts #pourover"
    assert first.tags == ("method", "pourover")
    assert first.cues == ("Coffee Brewing Methods",)
    assert first.links == (("note:coffee brewing methods", "observation_of"),)
    # a task item and a line in a code fence are not observations
    assert "note:coffee brewing methods#observation4" not in notes
    assert not any("[fake]" in n.content for k, n in notes.items() if "#" in k)
    # an untagged, uncategorised list item with a #tag is one, as in basic-memory
    assert notes["note:grinder settings#observation2"].tags == ("grind",)
    assert notes["note:ravi menon#observation2"].tags == ("contact", "coffee")


def test_basic_memory_reports_a_bad_note_and_skips_hidden_folders() -> None:
    notes, bad = _basic_memory()
    assert [(b.where, b.reason) for b in bad] == [
        (
            str(Path("people") / "broken-date.md"),
            "frontmatter created 'last tuesday' is not an ISO 8601 date or time",
        )
    ]
    assert len(notes) == 10
    assert not any("hidden folders" in n.content for n in notes.values())


def test_basic_memory_reads_one_note_and_refuses_other_things(tmp_path: Path) -> None:
    good, _ = _split(basic_memory.read(DATA / "basic-memory" / "people" / "ravi-menon.md"))
    assert [g.key for g in good] == [
        "note:ravi menon",
        "note:ravi menon#observation1",
        "note:ravi menon#observation2",
    ]
    (tmp_path / "notes.txt").write_text("hello")
    for wrong in (tmp_path / "notes.txt", tmp_path, tmp_path / "missing"):
        with pytest.raises(InvalidInput, match=r"expected a basic-memory project"):
            list(basic_memory.read(wrong))


# --- mem0 ------------------------------------------------------------------------


def test_mem0_reads_get_all_output() -> None:
    good, bad = _split(mem0.read(DATA / "mem0-export.json"))
    assert [g.content for g in good] == [
        "Is travelling to Paris in June",
        "Is vegetarian and allergic to peanuts",
        "Prefers window seats on long flights",
        "Name is Alex",
    ]
    # Mem0 writes Pacific time with its offset: kept as the same instant in UTC
    assert good[0].occurred_at == datetime(2025, 2, 26, 7, 57, 0, 108347, tzinfo=UTC)
    assert good[0].key == "mem0:f38b689d-6b24-45b7-bced-17fbb4d8bac7"
    assert good[1].tags == ("food", "health")  # platform categories, then metadata's
    assert good[2].tags == ("travel",)
    assert [(b.where, b.reason) for b in bad] == [
        ("record 4", 'no "memory" text'),
        ("record 5", "created_at 'last monday' is not an ISO 8601 time"),
        ("record 6", "not a JSON object"),
    ]


def test_mem0_reads_a_bare_list(tmp_path: Path) -> None:
    path = tmp_path / "memories.json"
    path.write_text('[{"id": "a1", "memory": "Likes jazz", "created_at": null}]')
    assert list(mem0.read(path)) == [Imported("mem0:a1", "Likes jazz")]


@pytest.mark.parametrize(
    "text",
    ["not json at all", '{"entities": []}', '[{"content": "an mcp-memory-service row"}]', "42"],
)
def test_mem0_refuses_other_files(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=r"expected Mem0's exported memories|is not Mem0's"):
        list(mem0.read(path))


# --- mcp-memory-service ----------------------------------------------------------


def test_mcp_memory_service_reads_its_export() -> None:
    good, bad = _split(mcp_memory_service.read(DATA / "mcp-memory-service-export.json"))
    by_text = {g.content: g for g in good}
    decision = by_text[
        "Decided to keep the API versioned in the URL path (/v2/...), not in headers."
    ]
    # tags, then the memory type; the Unix created_at as the memory's date
    assert decision.tags == ("api", "architecture", "decision")
    assert decision.occurred_at == datetime(2025, 3, 3, 14, 32, 25, 123000, tzinfo=UTC)
    assert decision.key.startswith("mms:3f2a9c1d")
    # the storage form (tags_str, type, an ISO time without offset read as UTC)
    reviews = by_text["Asha prefers reviews as a list of numbered points."]
    assert reviews.tags == ("preferences", "team", "note")
    assert reviews.occurred_at == datetime(2025, 3, 10, 9, 0, tzinfo=UTC)
    # a memory exported without its hash is kept, keyed by its content's SHA-256
    rotate = by_text["Rotate the webhook signing secret every 90 days."]
    assert rotate.key == "mms:af52580e58ed22f996a148fd6736689a8e48a9eae8597ddaed640a92337005bb"
    assert len(good) == 5
    assert [(b.where, b.reason) for b in bad] == [
        ("memory 5", "created_at 'soon' is neither a Unix time nor ISO 8601"),
        ("memory 6", 'no "content" text'),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "<html>",
        '{"memories": []}',
        '[{"memory": "a mem0 row"}]',
        '{"export_metadata": {}, "memories": 3}',
    ],
)
def test_mcp_memory_service_refuses_other_files(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=r"expected an mcp-memory-service export|is not an mcp"):
        list(mcp_memory_service.read(path))


# --- through the console script --------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No API keys; the store and HOME inside the test's directory; no backup."""
    return console_env(tmp_path)


def _import_twice(env: dict[str, str], fmt: str, path: Path) -> dict[str, Any]:
    """Import ``path``; import it again and check the second run adds nothing."""
    first = _ok(_smriti(env, "import", "--from", fmt, str(path), "--json"))
    again = _ok(_smriti(env, "import", "--from", fmt, str(path), "--json"))
    assert again["stored"] == 0 and again["associations"] == 0
    assert again["already_there"] == first["stored"] + first["already_there"]
    listed = _ok(_smriti(env, "recall", "--limit", "100", "--json"))
    assert listed["count"] == first["stored"]
    return first


def _memories(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    listed = _ok(_smriti(env, "recall", "--limit", "100", "--json"))
    return {m["content"]: m for m in listed["results"]}


def _related(env: dict[str, str], memory_id: str) -> set[tuple[str, str]]:
    shown = _ok(_smriti(env, "related", memory_id, "--json"))
    return {(r["id"], r["relation"]) for r in shown["related"]}


def test_cli_imports_a_claude_code_transcript(env: dict[str, str]) -> None:
    report = _import_twice(env, "claude-code", DATA / "claude-code-session.jsonl")
    assert (report["records"], report["stored"], report["rejected_count"]) == (5, 3, 2)
    assert report["rejected"][0] == {"where": "line 10", "reason": "not a JSON object"}
    memories = _memories(env)
    asha = memories["Also: my name is Asha and I review every PR on Fridays."]
    assert asha["origin"] == "import:claude-code"
    assert asha["created_at"] == "2026-01-20T12:03:41.555000+00:00"
    first = memories[
        "The tide gauge CSVs from the harbour office use semicolons, not commas. "
        "Always parse them with sep=';'."
    ]
    assert (first["id"], "follows") in _related(env, asha["id"])


def test_cli_imports_a_basic_memory_project(env: dict[str, str]) -> None:
    report = _import_twice(env, "basic-memory", DATA / "basic-memory")
    assert (report["records"], report["stored"], report["rejected_count"]) == (11, 10, 1)
    memories = _memories(env)
    ravi = next(m for c, m in memories.items() if c.startswith("Ravi Menon\n"))
    coffee = next(m for c, m in memories.items() if c.startswith("# Coffee Brewing Methods"))
    prefers = memories["Prefers washed Ethiopian coffees"]
    assert prefers["origin"] == "import:basic-memory"
    assert prefers["created_at"] == "2025-01-11T14:00:00+00:00"
    assert {"preference", "Ravi Menon"} <= set(prefers["tags"])
    assert (ravi["id"], "observation_of") in _related(env, prefers["id"])
    assert (ravi["id"], "brewed with") in _related(env, coffee["id"])


def test_cli_imports_a_mem0_export(env: dict[str, str]) -> None:
    preview = _ok(
        _smriti(
            env, "import", "--from", "mem0", str(DATA / "mem0-export.json"), "--dry-run", "--json"
        )
    )
    assert preview["stored"] == 4 and preview["sample"]
    assert _ok(_smriti(env, "recall", "--json"))["count"] == 0  # a dry run stores nothing
    report = _import_twice(env, "mem0", DATA / "mem0-export.json")
    assert (report["records"], report["stored"], report["rejected_count"]) == (7, 4, 3)
    paris = _memories(env)["Is travelling to Paris in June"]
    assert paris["origin"] == "import:mem0"
    assert paris["created_at"] == "2025-02-26T07:57:00.108347+00:00"


def test_cli_imports_an_mcp_memory_service_export(env: dict[str, str]) -> None:
    path = DATA / "mcp-memory-service-export.json"
    report = _import_twice(env, "mcp-memory-service", path)
    assert (report["records"], report["stored"], report["rejected_count"]) == (7, 5, 2)
    billing = _memories(env)["Billing service owns the invoices table."]
    assert billing["origin"] == "import:mcp-memory-service"
    assert set(billing["tags"]) == {"billing", "observation"}
    assert billing["created_at"] == "2025-03-11T13:33:20.500000+00:00"


def test_cli_names_the_expected_format_in_one_line(env: dict[str, str]) -> None:
    wrong = _smriti(env, "import", "--from", "mem0", str(DATA / "claude-code-session.jsonl"))
    assert wrong.returncode == 2, wrong.stderr
    assert "expected Mem0's exported memories" in wrong.stderr
    assert "Traceback" not in wrong.stderr
