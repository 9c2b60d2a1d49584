"""``smriti import --from mcp-memory|markdown`` and ``smriti export --to mcp-memory``, run
through the real console script on a temporary store.

The memory.jsonl sample was written by the reference memory server itself
(@modelcontextprotocol/server-memory 2026.8.31, driven through its own tools by
tests/data/importers/mcp-memory/make_sample.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from smriti.testing.console import console_env
from smriti.testing.console import json_ok as ok
from smriti.testing.console import run as smriti

SAMPLE = Path(__file__).parent / "data" / "importers" / "mcp-memory" / "memory.jsonl"
#: The sample's observations, plus one memory for the entity without any.
SAMPLE_TEXTS = {
    "Prefers dark roast coffee, no sugar",
    "Works remotely from Pune on Tuesdays and Thursdays",
    "Is allergic to peanuts",
    "Speaks Tamil and German",
    "Builds warehouse picking robots",
    "Headquartered in Bengaluru",
    "Migrates the fleet scheduler from Python 2 to Python 3.12",
    "Bengaluru (city)",
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No API keys, no backup; storage and HOME inside the test's directory."""
    return console_env(tmp_path)


def memories(env: dict[str, str], **extra: str) -> list[dict[str, Any]]:
    listed = ok(smriti(env, "recall", "--mode", "list", "--limit", "100", "--json", **extra))
    return listed["results"]  # type: ignore[no-any-return]


def test_mcp_memory_import_keeps_observations_cues_and_relations(env: dict[str, str]) -> None:
    preview = ok(smriti(env, "import", "--from", "mcp-memory", str(SAMPLE), "--dry-run", "--json"))
    assert (preview["records"], preview["stored"], preview["rejected_count"]) == (8, 8, 0)
    assert preview["sample"][0]["content"] == "Prefers dark roast coffee, no sugar"
    assert memories(env) == []  # a dry run stores nothing

    report = ok(smriti(env, "import", "--from", "mcp-memory", str(SAMPLE), "--json"))
    assert (report["stored"], report["associations"], report["rejected_count"]) == (8, 3, 0)
    stored = memories(env)
    assert {m["content"] for m in stored} == SAMPLE_TEXTS
    assert {m["origin"] for m in stored} == {"import:mcp-memory"}
    peanuts = next(m for m in stored if m["content"] == "Is allergic to peanuts")
    assert peanuts["tags"] == ["Priya_Raman", "person"]

    coffee = next(m for m in stored if m["content"].startswith("Prefers dark roast"))
    edges = ok(smriti(env, "get", coffee["id"], "--json"))["associations"]
    out = {(e["summary"], e["relation"]) for e in edges if e["direction"] == "out"}
    assert ("Builds warehouse picking robots", "works_at") in out
    assert ("Migrates the fleet scheduler from Python 2 to Python 3.12", "leads") in out

    again = ok(smriti(env, "import", "--from", "mcp-memory", str(SAMPLE), "--json"))
    assert (again["stored"], again["already_there"], again["associations"]) == (0, 8, 0)
    assert len(memories(env)) == 8


def test_a_partly_bad_file_imports_the_good_records(env: dict[str, str], tmp_path: Path) -> None:
    lines = SAMPLE.read_text().splitlines()
    bad = [
        *lines[:2],
        "{not json",
        '{"type":"relation","from":"Priya_Raman","to":"Nobody","relationType":"knows"}',
        '{"type":"entity","entityType":"person","observations":["no name"]}',
    ]
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(bad))
    report = ok(smriti(env, "import", "--from", "mcp-memory", str(path), "--json"))
    assert report["stored"] == 6
    reasons = {r["where"]: r["reason"] for r in report["rejected"]}
    assert reasons == {
        "line 3": "not JSON",
        "line 4": "relation to unknown entity 'Nobody'",
        "line 5": "an entity without a name",
    }


def test_a_file_in_another_format_is_one_error_line(env: dict[str, str], tmp_path: Path) -> None:
    other = tmp_path / "notes.jsonl"
    other.write_text('{"content": "a mem0 memory"}\n')
    result = smriti(env, "import", "--from", "mcp-memory", str(other))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "expected the reference memory server's memory.jsonl" in result.stderr
    unknown = smriti(env, "import", "--from", "evernote", str(other))
    assert unknown.returncode == 2 and "unknown import format 'evernote'" in unknown.stderr
    assert "mcp-memory" in unknown.stderr


def test_export_to_mcp_memory_round_trips_every_text(env: dict[str, str], tmp_path: Path) -> None:
    ok(smriti(env, "import", "--from", "mcp-memory", str(SAMPLE), "--json"))
    ok(smriti(env, "store", "the grinder broke on monday", "--json"))
    out = tmp_path / "out.jsonl"
    written = ok(smriti(env, "export", "--to", "mcp-memory", str(out), "--json"))
    assert written["observations"] == 9 and written["relations"] == 3
    records = [json.loads(line) for line in out.read_text().splitlines()]
    people = {r["name"]: r for r in records if r["type"] == "entity"}
    assert people["Priya_Raman"]["entityType"] == "person"
    assert len(people["Priya_Raman"]["observations"]) == 4
    relations = {
        (r["from"], r["to"], r["relationType"]) for r in records if r["type"] == "relation"
    }
    assert ("Priya_Raman", "Acme_Robotics", "works_at") in relations

    back = ok(
        smriti(env, "import", "--from", "mcp-memory", str(out), "--json", ACCESSING_USER="bob")
    )
    assert back["rejected_count"] == 0
    texts = {m["content"] for m in memories(env)}
    assert texts == SAMPLE_TEXTS | {"the grinder broke on monday"}
    assert {m["content"] for m in memories(env, ACCESSING_USER="bob")} == texts


def test_markdown_one_memory_per_paragraph(env: dict[str, str], tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "work").mkdir(parents=True)
    (notes / ".obsidian").mkdir()
    (notes / ".obsidian" / "cache.md").write_text("not a note")
    (notes / "home.md").write_text(
        "---\ntitle: Home\n---\n# Kitchen\n\nThe espresso grinder needs a burr clean "
        "every month.\n\nThe oven runs hot:\nset it 10 degrees lower.\n"
    )
    (notes / "work" / "deploy.txt").write_text(
        "Deploys go out on Wednesdays.\n\n```\nmake deploy\n\nmake verify\n```\n"
    )
    old = 1_600_000_000  # 2020-09-13: the memories keep their files' dates
    for file in (notes / "home.md", notes / "work" / "deploy.txt"):
        os.utime(file, (old, old))
    report = ok(smriti(env, "import", "--from", "markdown", str(notes), "--json"))
    assert (report["records"], report["stored"], report["rejected_count"]) == (4, 4, 0)
    stored = {m["content"]: m for m in memories(env)}
    assert set(stored) == {
        "The espresso grinder needs a burr clean every month.",
        "The oven runs hot:\nset it 10 degrees lower.",
        "Deploys go out on Wednesdays.",
        "```\nmake deploy\n\nmake verify\n```",
    }
    oven = stored["The oven runs hot:\nset it 10 degrees lower."]
    assert oven["tags"] == ["home", "Kitchen"] and oven["origin"] == "import:markdown"
    assert oven["created_at"].startswith("2020-09-13")
    again = ok(smriti(env, "import", "--from", "markdown", str(notes), "--json"))
    assert (again["stored"], again["already_there"]) == (0, 4)


def test_markdown_secrets_are_screened_as_a_store_screens_them(
    env: dict[str, str], tmp_path: Path
) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    note = tmp_path / "ci.md"
    note.write_text(f"The CI token is {token}\n")
    preview = ok(smriti(env, "import", "--from", "markdown", str(note), "--dry-run", "--json"))
    assert token not in json.dumps(preview)
    report = ok(smriti(env, "import", "--from", "markdown", str(note), "--json"))
    assert report["redacted"] >= 1
    [memory] = memories(env)
    assert token not in memory["content"] and memory["content"].startswith("The CI token is")


def test_markdown_refuses_what_is_not_text(env: dict[str, str], tmp_path: Path) -> None:
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(b"%PDF-1.7")
    result = smriti(env, "import", "--from", "markdown", str(pdf))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "markdown reads a .md, .markdown or .txt file" in result.stderr


def test_a_repeated_paragraph_is_merged_by_the_store_rule(
    env: dict[str, str], tmp_path: Path
) -> None:
    ok(smriti(env, "store", "The team standup is at 9:30 every weekday.", "--json"))
    note = tmp_path / "meetings.md"
    note.write_text(
        "the team standup is at 9:30, every weekday\n\nRetro happens on alternate Fridays.\n"
    )
    report = ok(smriti(env, "import", "--from", "markdown", str(note), "--json"))
    assert (report["stored"], report["merged"]) == (1, 1)
    assert len(memories(env)) == 2
