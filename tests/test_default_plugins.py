"""The built-in lexical embedder, heuristic extractor and Leiden clusterer."""

from __future__ import annotations

import numpy as np

from smriti.config import Settings
from smriti.default_plugins.heuristic_extractor import HeuristicExtractor
from smriti.default_plugins.leiden import LeidenClusterer, stable_ids
from smriti.default_plugins.lexical_embedder import LexicalEmbedder
from smriti.model import CUE_TYPES, MEMORY_TYPES


def test_lexical_embedder_is_deterministic_unit_and_lexical() -> None:
    emb = LexicalEmbedder.from_settings(Settings.from_env({}))
    texts = ["Newton discovered gravity", "gravity was discovered by Newton", "I like pizza", ""]
    a = emb.embed(texts)
    b = LexicalEmbedder().embed(texts)
    assert a.shape == (4, 384) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a[:3], axis=1), 1.0, rtol=1e-5)
    assert not a[3].any()
    assert a[0] @ a[1] > 0.8 > a[0] @ a[2]
    assert emb.model_id == "lexical:v1:384" and emb.dims == 384


def test_lexical_embedder_handles_unicode_and_plurals() -> None:
    emb = LexicalEmbedder()
    v = emb.embed(["apples", "apple", "नमस्ते दुनिया", "東京タワー"])
    assert v[0] @ v[1] > 0.99
    assert np.isfinite(v).all()


def test_heuristic_extractor_cues_types_and_summary() -> None:
    x = HeuristicExtractor()
    out = x.extract("Yesterday I met Alice Smith in New York. We talked about Kubernetes clusters.")
    names = [c.name for c in out.cues]
    assert "alice smith" in names and "new york" in names and "kubernetes" in names
    assert out.memory_type == "episodic"
    assert out.summary == "Yesterday I met Alice Smith in New York."
    assert 1 <= len(out.cues) <= 10
    assert all(c.cue_type in CUE_TYPES for c in out.cues)
    assert len(names) == len(set(names))


def test_heuristic_extractor_memory_types() -> None:
    x = HeuristicExtractor()
    assert x.extract("How to deploy: first run make, then push.").memory_type == "procedural"
    assert x.extract("Water boils at 100 degrees Celsius.").memory_type == "semantic"
    for text in ("", "!!!", "a " * 5000):
        out = x.extract(text)
        assert out.memory_type in MEMORY_TYPES and len(out.cues) <= 10


def test_heuristic_extractor_shares_cues_for_the_associative_leap() -> None:
    x = HeuristicExtractor()
    cues = [
        {c.name for c in x.extract(t).cues}
        for t in (
            "Newton discovered gravity when an apple fell",
            "apples and strawberries are fruit",
            "the user loves strawberries",
        )
    ]
    assert "apple" in cues[0] & cues[1]
    assert "strawberry" in cues[1] & cues[2]


def two_cliques() -> tuple[list[str], list[tuple[str, str, float]]]:
    a = [f"a{i}" for i in range(6)]
    b = [f"b{i}" for i in range(6)]
    edges = [(x, y, 0.9) for grp in (a, b) for i, x in enumerate(grp) for y in grp[i + 1 :]]
    edges.append(("a0", "b0", 0.1))
    return a + b, edges


def test_leiden_finds_communities_deterministically_and_keeps_state() -> None:
    nodes, edges = two_cliques()
    first = LeidenClusterer().cluster(nodes, edges, {}, {})
    again = LeidenClusterer().cluster(nodes, edges, {}, {})
    assert first.membership == again.membership
    assert len({first.membership[n] for n in nodes[:6]}) == 1
    assert first.membership["a1"] != first.membership["b1"]
    assert first.state["nodes"] == 12 and 0.1 <= float(first.state["resolution"]) <= 10


def test_leiden_reuses_resolution_until_node_count_changes_by_ten_percent() -> None:
    nodes, edges = two_cliques()
    pinned = {"resolution": 0.5, "nodes": 12}
    assert LeidenClusterer().cluster(nodes, edges, pinned, {}).state["resolution"] == 0.5
    moved = {"resolution": 0.5, "nodes": 100}
    assert LeidenClusterer().cluster(nodes, edges, moved, {}).state["nodes"] == 12


def test_leiden_keeps_cluster_ids_stable_across_runs() -> None:
    nodes, edges = two_cliques()
    previous = {n: (7 if n.startswith("a") else 3) for n in nodes}
    result = LeidenClusterer().cluster(nodes, edges, {}, previous)
    assert result.membership == previous


def test_stable_ids_give_new_communities_fresh_ids() -> None:
    ids = stable_ids(["x", "y", "z"], [0, 0, 1], {"x": 4, "y": 4})
    assert ids[0] == ids[1] == 4 and ids[2] == 5


def test_leiden_is_seeded_and_leaves_the_global_random_state_alone() -> None:
    import random

    rng = random.Random(5)
    nodes = [f"n{i:03d}" for i in range(300)]
    edges = sorted(
        {
            (nodes[a], nodes[b], round(rng.random(), 3))
            for a in range(300)
            for b in (rng.randrange(300), (a // 30) * 30 + rng.randrange(30))
            if a < b
        }
    )
    random.seed(123)
    first = LeidenClusterer().cluster(nodes, edges, {}, {})
    after_first = random.random()
    random.seed(999)  # a different global state must not change the partition
    second = LeidenClusterer().cluster(nodes, edges, {}, {})
    random.seed(123)
    assert random.random() == after_first, "the clusterer must not consume global random"
    assert first.membership == second.membership
    assert 2 < len(set(first.membership.values())) < 60
