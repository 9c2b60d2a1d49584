"""Recall equality: the engine recalls the same memories, in the same order, on this
backend as on the core's reference backend (SQLite), for the same data.

Subclass :class:`RecallEqualityTests` and override ``backend_factory`` exactly as for
the storage suite (``make(user)`` gives an opened, empty store). The test stores a
corpus through the engine's full pipeline on a reference store (cues, associations,
clusters), copies every record into the backend under test and into a second
reference store, then runs the same sequence of recalls (associative, vector-only,
list, filtered by type) on both and compares ids and order; scores equal within 1e-4
are ties, compared as sets (a tie cut by the limit may keep different members).

The lexical channel is the one a backend may legitimately rank differently (each uses
its own full-text engine and analyzer), so every query's words occur in at most one
memory: its lexical hits then agree everywhere. Every other channel (vectors, cues by
name and embedding, associations, shared cues) must agree exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from smriti.backend import StorageBackend
from smriti.config import Settings
from smriti.engine.core import Engine
from smriti.model import RecallResult
from smriti.plugins import Registry, create_plugin_manager

Make = Callable[[str], StorageBackend]

#: Topic words; each memory says something about one topic, so topics share cues and
#: the memories of a topic associate.
TOPICS = {
    "music": "guitar melody concert rhythm violin chorus",
    "travel": "airport passport luggage train ticket hotel",
    "cooking": "recipe oven garlic pasta tomato kitchen",
    "work": "deadline meeting project manager report budget",
    "garden": "tulip compost shovel hedge orchard seedling",
    "health": "doctor fever vitamin clinic exercise sleep",
}
_SYLLABLES = ("ka", "ri", "mo", "zu", "te", "vo", "la", "ni", "pe", "qu")
#: Queries: the code word of these memories, alone.
QUERIED = (0, 5, 11, 17, 23, 29, 31, 34)
SCORE_TIE = 1e-4


def code_word(i: int) -> str:
    """A made-up word that occurs in memory ``i`` only (letters only, no plural form)."""
    a, b, c = _SYLLABLES[i % 10], _SYLLABLES[(i // 10) % 10], _SYLLABLES[(i * 7 + 3) % 10]
    return f"{a}{b}{c}x"


def corpus() -> list[tuple[str, list[str]]]:
    """36 memories: (content, tags), six per topic."""
    memories = []
    for i, (topic, words) in enumerate(itertools.islice(itertools.cycle(TOPICS.items()), 36)):
        vocabulary = words.split()
        chosen = [vocabulary[(i + k) % len(vocabulary)] for k in range(3)]
        content = f"Notes on {topic}: {' '.join(chosen)} with {code_word(i)}"
        memories.append((content, [topic]))
    return memories


def _settings(root: Path) -> Settings:
    return Settings.from_env(
        {
            "STORAGE_LOCATION": str(root),
            "DB_TYPE": "sqlite",
            "SMRITI_EMBEDDER": "lexical",
            "SMRITI_CUE_EXTRACTOR": "heuristic",
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_TYPE": "none",
            "SMRITI_OWNER": "off",
            "SMRITI_WORKING_SET": "off",
        }
    )


def _registry() -> Registry:
    pm, _ = create_plugin_manager(load_entry_points=False)
    return Registry(pm)


def _calls(engine: Engine) -> Iterator[tuple[str, list[RecallResult]]]:
    """The recall sequence both engines run (each recall strengthens what it returns,
    so later calls see the effects of earlier ones, on both sides alike)."""
    memories = corpus()
    for i in QUERIED:
        query = code_word(i)
        yield f"recall {query}", engine.recall(query, limit=8)
    for i in QUERIED[:3]:
        query = memories[i][0]
        yield f"search {i}", engine.recall(query, limit=5, mode="search")
        yield f"typed {i}", engine.recall(code_word(i), limit=5, memory_type="semantic")
    yield "list", engine.recall(None, limit=10, mode="list")


#: Stores the store pipeline must answer alike on every backend: facts that differ in
#: one detail are all kept, only a repeat (case, spacing, punctuation) is merged.
STORES = (
    "We chose option A for the launch",
    "We chose option B for the launch",
    "we chose option b for the launch!",
    "Take vitamin D daily with breakfast",
    "Take vitamin C daily with breakfast",
    "The meeting moved to building A",
    "The meeting moved to building B",
    "  THE MEETING MOVED TO BUILDING B  ",
    "The cabin faces north",
    "The cabin faces south",
)


def _stored(engine: Engine) -> list[tuple[int, bool, list[int]]]:
    """Each store of STORES as (position of the memory it made or repeated,
    deduplicated, positions of its near-duplicates): ids differ between stores."""
    ids: list[str] = []
    out = []
    for text in STORES:
        outcome = engine.store(text)
        if outcome.engram.id not in ids:
            ids.append(outcome.engram.id)
        near = [ids.index(e.id) for e, _ in outcome.near_duplicates]
        out.append((ids.index(outcome.engram.id), outcome.deduplicated, near))
    return out


def _groups(results: Sequence[RecallResult]) -> list[set[str]]:
    """Result ids grouped by score, ties (within SCORE_TIE) together, best first."""
    groups: list[set[str]] = []
    last: float | None = None
    for r in results:
        if last is not None and abs(r.score - last) <= SCORE_TIE:
            groups[-1].add(r.engram.id)
        else:
            groups.append({r.engram.id})
        last = r.score
    return groups


def _shown(results: Sequence[RecallResult]) -> list[tuple[str, float, str, int]]:
    return [(r.engram.id, round(r.score, 5), r.match_type, r.hop) for r in results]


class RecallEqualityTests:
    """The engine's recall on a backend equals its recall on the reference backend."""

    @pytest.fixture
    def backend_factory(self) -> Make:
        """Return ``make(user)`` giving an opened, empty backend; subclasses override."""
        raise NotImplementedError("override the backend_factory fixture")

    @pytest.fixture
    def records(self, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
        """The corpus as the engine's store pipeline writes it (on a reference store)."""
        root = tmp_path_factory.mktemp("recall-reference")
        with Engine(_settings(root), _registry(), "builder") as engine:
            for content, tags in corpus():
                engine.store(content, 0.6, tags)
            b = engine.backend
            return (
                list(b.iter_engrams()),
                list(b.iter_cues()),
                list(b.iter_links()),
                list(b.iter_associations()),
                list(b.iter_cooccurrences()),
            )

    def test_store_keeps_distinct_facts_as_on_the_reference_backend(
        self, backend_factory: Make, tmp_path: Path
    ) -> None:
        settings = _settings(tmp_path)
        registry = _registry()
        reference = registry.get("backend", "sqlite", "DB_TYPE").from_settings(settings, "dd")
        reference.open()
        try:
            want = _stored(Engine(settings, registry, "dd", backend=reference))
            target = backend_factory("dd")
            got = _stored(Engine(settings, registry, "dd", backend=target))
            assert target.count_engrams() == len(STORES) - 2
        finally:
            reference.close()
        assert sum(dedup for _, dedup, _ in got) == 2, got
        assert got == want

    def test_recall_matches_the_reference_backend(
        self, backend_factory: Make, records: tuple[Any, ...], tmp_path: Path
    ) -> None:
        settings = _settings(tmp_path)
        registry = _registry()
        reference = registry.get("backend", "sqlite", "DB_TYPE").from_settings(settings, "eq")
        reference.open()
        try:
            reference.import_records(*records)
            target = backend_factory("eq")
            target.import_records(*records)
            assert target.counts() == reference.counts()
            want = dict(_calls(Engine(settings, registry, "eq", backend=reference)))
            got = dict(_calls(Engine(settings, registry, "eq", backend=target)))
        finally:
            reference.close()
        assert any(r.hop > 0 for name in want for r in want[name]), "no associative hop"
        for name, results in want.items():
            shown = (name, _shown(got[name]), _shown(results))
            mine, theirs = _groups(got[name]), _groups(results)
            # The last group may be cut by the limit: which of its ties made it is open.
            assert mine[:-1] == theirs[:-1], shown
            assert [len(g) for g in mine] == [len(g) for g in theirs], shown
            for g, w in zip(got[name], results, strict=True):
                assert g.score == pytest.approx(w.score, abs=SCORE_TIE), shown
