"""Names match by name: with a sentence model, similarly spelled names have close cue
embeddings, and recall must not join them through those."""

from __future__ import annotations

from pathlib import Path

from smriti.config import Settings
from smriti.engine import Engine


def test_a_name_does_not_recall_a_similarly_spelled_one(tmp_path: Path, model_dir: Path) -> None:
    settings = Settings.from_env(
        {
            "STORAGE_LOCATION": str(tmp_path),
            "DB_TYPE": "sqlite",
            "SMRITI_EMBEDDER": "local",
            "SMRITI_LOCAL_MODEL": str(model_dir),
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
        }
    )
    with Engine.from_settings(settings) as engine:
        other = engine.store("We met Muhammad at the trailhead for a hike").engram
        joined = engine.store("We hired Mohammed for the data team").engram
        vectors = engine.embed(["muhammad", "mohammed"])
        closeness = float(vectors[0] @ vectors[1])
        assert closeness >= 0.8, f"the names' embeddings are not close ({closeness:.3f})"
        cued = [r.engram.id for r in engine.recall("Mohammed", limit=5) if r.match_type == "cue"]
        assert cued == [joined.id]
        assert other.id not in cued
