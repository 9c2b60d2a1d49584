"""erase_deleted on a real store (Kùzu or LadybugDB): the deleted bytes leave every file,
and a failed or interrupted erase leaves the store as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import smriti_embedded_graph.erase as erase
from smriti_embedded_graph.testing import engine_under_test

from smriti.backend import BackendError
from smriti.testing import GraphBuilder

Backend = engine_under_test()
DB_FILE = Backend.db_file

TOKEN = "zqxjtokenvortex"
Factory = Callable[..., Backend]


def files_holding(root: Path, needle: str) -> list[str]:
    return sorted(
        p.name for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()
    )


def fill(backend: Backend, build: GraphBuilder) -> None:
    """Three memories; the first holds the token in its content and in a cue of its own."""
    shared = build.cue("shared")
    backend.add_memory(
        build.engram(1, content=f"the code is {TOKEN}"), [shared, build.cue(TOKEN)], []
    )
    for i in (2, 3):
        backend.add_memory(build.engram(i), [shared], [])
    backend.journal.write_queued()


@pytest.fixture
def build() -> GraphBuilder:
    return GraphBuilder(8)


def test_deleted_bytes_stay_after_a_checkpoint_and_go_after_the_erase(
    store_factory: Factory, build: GraphBuilder, tmp_path: Path
) -> None:
    backend = store_factory("alice")
    fill(backend, build)
    backend.delete_engrams(["e00001"])
    with backend.journal.exclusive():
        assert backend.journal.checkpoint(force=True)
    # why the erase exists: Kùzu keeps what it deleted in the file
    assert DB_FILE in files_holding(tmp_path / "alice", TOKEN)
    assert backend.erase_deleted() == 1
    assert files_holding(tmp_path / "alice", TOKEN) == []
    assert sorted(e.id for e in backend.iter_engrams()) == ["e00002", "e00003"]
    assert backend.get_cues([TOKEN]) == []
    backend.add_memory(build.engram(4), [build.cue("shared")], [])  # writable after
    assert backend.count_engrams() == 3


def test_a_failed_rebuild_leaves_the_store_as_it_was(
    store_factory: Factory, build: GraphBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = store_factory("alice")
    fill(backend, build)
    backend.delete_engrams(["e00001"])

    def failing(*args: object) -> None:
        raise BackendError(f"cannot rebuild {DB_FILE} to erase: injected")

    monkeypatch.setattr(erase, "_import", failing)
    with pytest.raises(BackendError, match="injected"):
        backend.erase_deleted()
    assert not backend.eraser.erase_scratch.exists(), "the export (the store's texts) was left"
    assert sorted(e.id for e in backend.iter_engrams()) == ["e00002", "e00003"]
    monkeypatch.undo()
    # The next erase does it. An engine that exports parquet deleted the orphaned cue
    # from the old file before the export, so only the Kùzu (CSV) one drops it now.
    assert backend.erase_deleted() == (1 if Backend.export_format == "csv" else 0)
    assert files_holding(tmp_path / "alice", TOKEN) == []


def test_what_an_interrupted_erase_left_is_removed_at_open(tmp_path: Path) -> None:
    path = tmp_path / "alice" / DB_FILE
    left = path.with_name(path.name + erase.SCRATCH_SUFFIX) / "export"
    left.mkdir(parents=True)
    (left / "Engram.csv").write_text(f"e1,{TOKEN}\n")
    backend = Backend("alice", path)
    backend.open()
    try:
        assert files_holding(tmp_path, TOKEN) == []
    finally:
        backend.close()
