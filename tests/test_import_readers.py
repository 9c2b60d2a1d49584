"""The import readers on sample files in each tool's own format (tests/data/importers/).

Each sample is built from the format the tool writes (the version is named in the
reader's docstring) and holds the awkward cases: records to skip, bad records that must
be reported by line or file while the good ones are read, links between records.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from smriti.errors import InvalidInput
from smriti.importers import READERS, Imported, Rejected, claude_code

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
    # tool results, meta entries, slash commands, the sub-agent's prompt: none of them
    assert not any("csv.reader" in g.content or "Caveat" in g.content for g in good)
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
