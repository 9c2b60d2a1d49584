"""The engine's common similarity scale (``Embedder.similarity_baseline``).

``Shifted`` is the built-in lexical embedder's space with one constant dimension added,
so that every cosine it gives is raised exactly: ``c -> b + (1 - b) c``, the way a model
like bge-small-en-v1.5 places unrelated texts far closer than all-MiniLM-L6-v2 does.
Declaring ``b`` as its baseline must make the engine decide and rank exactly as with
the plain lexical embedder; not declaring it must not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from smriti import Embedder, hookimpl
from smriti.config import Settings
from smriti.default_plugins.lexical_embedder import LexicalEmbedder
from smriti.embedding import SimilarityScale
from smriti.engine import Engine
from tests.conftest import TEST_BACKEND, plugin_manager

BASELINE = 0.5

MEMORIES = [
    "Alice moved to Lisbon in March to work for a robotics startup.",
    "Alice moved to Lisbon in March to work for a robotics start-up company.",
    "Alice now lives in Porto and works for a robotics startup.",
    "Bob adopted a grey cat called Miso from the shelter.",
    "Bob's cat Miso likes to sleep on the piano.",
    "Bob adopted the grey cat called Miso from the shelter.",
    "bob adopted a grey cat called miso from the shelter",
    "The team decided to use PostgreSQL for the billing service.",
    "The billing service runs on PostgreSQL 16 with logical replication.",
    "Carol is allergic to peanuts and shellfish.",
    "Carol ordered a vegetarian curry without peanuts.",
    "The quarterly review meeting is on the first Monday of April.",
    "Dave plays the cello in a community orchestra on Thursdays.",
    "The orchestra rehearses Dvorak's ninth symphony this season.",
]
QUERIES = [
    "where does Alice live and work?",
    "what is the name of Bob's cat?",
    "which database does billing use?",
    "what food is Carol allergic to?",
    "when do the orchestra rehearsals happen?",
]


class Shifted(Embedder):
    """Lexical vectors with every cosine raised to ``b + (1 - b) c``."""

    name = "shifted"
    declared = True

    def __init__(self) -> None:
        self.inner = LexicalEmbedder()

    @classmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> Shifted:
        return cls()

    @property
    def model_id(self) -> str:
        return f"shifted:{self.inner.model_id}"

    @property
    def dims(self) -> int:
        return self.inner.dims + 1

    @property
    def similarity_baseline(self) -> float:
        return BASELINE if self.declared else 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = self.inner.embed(texts) * math.sqrt(1.0 - BASELINE)
        extra = np.full((len(texts), 1), math.sqrt(BASELINE), dtype=np.float32)
        return np.hstack([rows, extra]).astype(np.float32)


class Undeclared(Shifted):
    name = "undeclared"
    declared = False


class ShiftedPlugin:
    @hookimpl
    def register_embedders(self) -> list[type[Embedder]]:
        return [Shifted, Undeclared]


def _engine(root: Path, embedder: str) -> Engine:
    pm = plugin_manager()
    pm.register(ShiftedPlugin())
    settings = Settings.from_env(
        {
            "STORAGE_LOCATION": str(root / embedder),
            "ACCESSING_USER": "alice",
            "DB_TYPE": TEST_BACKEND,
            "SMRITI_EMBEDDER": embedder,
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
        }
    )
    engine = Engine.from_settings(settings, pm=pm)
    engine.open()
    return engine


def _run(engine: Engine) -> dict[str, object]:
    """What the engine decided for each store, its association edges and its rankings,
    all by content (ids differ between stores)."""
    outcomes = []
    for text in MEMORIES:
        out = engine.store(text)
        outcomes.append(
            (
                out.deduplicated,
                sorted(e.content for e, _ in out.near_duplicates),
                sorted(e.content for e, _ in out.conflicts),
            )
        )
    content = {e.id: e.content for e in engine.backend.iter_engrams()}
    edges = sorted(
        (content[a.source_id], content[a.target_id], round(a.strength, 3))
        for a in engine.backend.iter_associations()
        if a.relation_type == "semantic"
    )
    rankings = [[r.engram.content for r in engine.recall(q, limit=3)] for q in QUERIES]
    return {"outcomes": outcomes, "edges": edges, "rankings": rankings}


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, dict[str, object]]:
    out = {}
    for name in ("lexical", "shifted", "undeclared"):
        engine = _engine(tmp_path, name)
        try:
            out[name] = _run(engine)
        finally:
            engine.close()
    return out


def test_a_declared_baseline_puts_a_model_on_the_engines_scale(runs) -> None:  # type: ignore[no-untyped-def]
    plain, shifted = runs["lexical"], runs["shifted"]
    assert plain["edges"], "the corpus must make some associations"
    assert any(near for _, near, _ in plain["outcomes"]), "and a near-duplicate"
    assert any(conflict for _, _, conflict in plain["outcomes"]), "and a possible conflict"
    assert any(repeat for repeat, _, _ in plain["outcomes"]), "and a repeat"
    assert shifted["outcomes"] == plain["outcomes"]
    assert shifted["edges"] == plain["edges"]  # strengths too, on the common scale
    assert shifted["rankings"] == plain["rankings"]


def test_without_its_baseline_a_model_links_unrelated_memories(runs) -> None:  # type: ignore[no-untyped-def]
    plain, undeclared = runs["lexical"], runs["undeclared"]
    assert len(undeclared["edges"]) > len(plain["edges"])
    assert undeclared["outcomes"] != plain["outcomes"]


def test_the_scale_maps_cosines_and_thresholds_both_ways() -> None:
    scale = SimilarityScale(0.48)
    assert scale.common(0.48) == pytest.approx(0.0)
    assert scale.common(1.0) == pytest.approx(1.0)
    assert scale.raw(0.7) == pytest.approx(0.844)
    assert scale.common(scale.raw(0.3)) == pytest.approx(0.3)
    assert scale.raw(-1.0) == -1.0  # "no floor" stays no floor
    assert SimilarityScale().common(0.3) == 0.3
    with pytest.raises(ValueError, match="baseline"):
        SimilarityScale(1.0)
