"""Peer comparison with mcp-super-memory (PyPI ``mcp-super-memory``), run as a library.

The wheel is fetched with ``pip download --no-deps`` into ``~/.cache/smriti-bench/peers``
and imported from there; it is not a dependency. Its module imports ``httpx`` (used only
for OpenAI embeddings), which this environment does not have: a stub stands in, since
both of its embedding functions are replaced by the benchmark's shared embedder (the same
cached vectors Smriti uses, so recall latency excludes embedding for both systems).

Loading: its ``MemoryGraph.add`` re-converts every key and memory embedding from Python
lists to numpy on each key of each add (O(memories × keys) per add) and rewrites the
whole graph as JSON after every add, which makes 5,000 adds take hours here. The first
``REAL_ADDS`` memories go through the real ``add`` (timed: its store latency); the rest
are loaded by ``fast_add``, a vectorised replica of ``add`` with the same rules (dedup
at cosine 0.9 → supersede, concept-key merge at 0.85, name keys by exact match, key
auto-link at 0.5). Keys are the heuristic extractor's cues (entities become ``name``
keys, the rest ``concept`` keys), standing in for the keys an LLM would pass.

Recall: ``MemoryGraph.recall(query, top_k=10)``; it strengthens what it returns (depth,
access count, last access), so, as for Smriti, those fields are restored after each
question. It also rewrites the JSON file after every recall: latency is reported with
that (as shipped) and with saving disabled (in-memory), and the ratio for both.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time
import types
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import locomo
import numpy as np
import structlog
from common import latency_summary, table

log = structlog.get_logger("bench.peer")
PEER = ("mcp-super-memory", "0.4.4")
REAL_ADDS = 150
#: Questions timed with the JSON rewrite after each recall (it is slow at 5,000).
AS_SHIPPED_QUESTIONS = 10


def _httpx_stub() -> None:
    if "httpx" in sys.modules:
        return
    try:
        import httpx  # noqa: F401
    except ImportError:
        stub = types.ModuleType("httpx")

        class _Unavailable(Exception):
            pass

        stub.AsyncClient = type("AsyncClient", (), {})  # type: ignore[attr-defined]
        stub.HTTPStatusError = _Unavailable  # type: ignore[attr-defined]
        stub.TransportError = _Unavailable  # type: ignore[attr-defined]
        sys.modules["httpx"] = stub


def load_module(data_dir: Path, embedder: locomo.CachingEmbedder) -> Any:
    """Import super_memory.memory_graph with its embedding routed to ``embedder``."""
    dest = locomo.CACHE / "peers" / f"mcp_super_memory-{PEER[1]}"
    if not (dest / "super_memory" / "memory_graph.py").is_file():
        from fetch_model import download_wheel

        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(download_wheel(*PEER, dest)) as zf:
            zf.extractall(dest)
    os.environ["SUPER_MEMORY_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("EMBEDDING_BACKEND", "local")
    _httpx_stub()
    # Its package __init__ imports the MCP server module, written for mcp 1.x (FastMCP);
    # the memory graph itself is a standalone module, so load just that file.
    spec = importlib.util.spec_from_file_location(
        "super_memory_graph", dest / "super_memory" / "memory_graph.py"
    )
    assert spec is not None and spec.loader is not None
    mg: Any = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mg
    spec.loader.exec_module(mg)

    def embed(text: str) -> list[float]:
        return [float(x) for x in embedder.embed([text])[0]]

    async def embed_async(text: str) -> list[float]:
        return embed(text)

    mg.embed_text = embed
    mg.embed_text_async = embed_async
    return mg


class Rows:
    """A growable float32 matrix (capacity doubles), with ids per row."""

    def __init__(self, dims: int = 384) -> None:
        self.ids: list[str] = []
        self.data = np.zeros((1024, dims), dtype=np.float32)

    def add(self, row_id: str, vector: Any) -> None:
        if len(self.ids) == self.data.shape[0]:
            self.data = np.vstack([self.data, np.zeros_like(self.data)])
        self.data[len(self.ids)] = np.asarray(vector, np.float32)
        self.ids.append(row_id)

    @property
    def matrix(self) -> np.ndarray:
        return self.data[: len(self.ids)]


class FastLoader:
    """Vectorised replica of ``MemoryGraph.add`` for bulk loading (see module doc)."""

    def __init__(self, mg: Any, graph: Any) -> None:
        self.mg, self.graph = mg, graph
        self.mems, self.keys, self.concepts = Rows(), Rows(), Rows()
        self.names: dict[tuple[str, str], str] = {}
        for kid, key in graph.keys.items():
            self._add_key_row(kid, key)
        for mid, mem in graph.memories.items():
            self.mems.add(mid, mem.embedding)

    def _add_key_row(self, kid: str, key: Any) -> None:
        self.keys.add(kid, key.embedding)
        if key.key_type == "concept":
            self.concepts.add(kid, key.embedding)
        else:
            self.names[(key.concept, key.key_type)] = kid

    def key(self, concept: str, key_type: str, embed: Any) -> str:
        """find_or_create_key: names by exact match, concepts merged at cosine 0.85."""
        g, mg = self.graph, self.mg
        if key_type in ("name", "proper_noun"):
            kid = self.names.get((concept, key_type))
            if kid:
                return kid
        vec = np.asarray(embed(concept), np.float32)
        if key_type == "concept" and self.concepts.ids:
            sims = self.concepts.matrix @ vec
            best = int(np.argmax(sims))
            if float(sims[best]) >= mg.KEY_MERGE_THRESHOLD:
                return self.concepts.ids[best]
        kid = mg._uid()
        g.keys[kid] = mg.Key(id=kid, concept=concept, embedding=vec.tolist(), key_type=key_type)
        self._add_key_row(kid, g.keys[kid])
        return kid

    def add(self, content: str, keys: list[str], types_: dict[str, str], embed: Any) -> str:
        """One memory, as ``MemoryGraph.add`` would store it."""
        g, mg = self.graph, self.mg
        emb = np.asarray(embed(content), np.float32)
        dup = None
        if self.mems.ids:
            sims = self.mems.matrix @ emb
            for i in np.argsort(-sims)[:5]:
                if sims[i] < mg.MEMORY_DEDUP_THRESHOLD:
                    break
                if self.mems.ids[i] not in g._superseded_by:
                    dup = self.mems.ids[i]
                    break
        mid = mg._uid()
        now = time.time()
        mem = mg.Memory(id=mid, content=content, embedding=emb.tolist(), created_at=now,
                        last_accessed=now)  # fmt: skip
        if dup is not None:
            old = g.memories[dup]
            mem.supersedes = dup
            old.depth = old.depth * 0.8 if old.depth >= mg.DEPTH_DEEP_THRESHOLD else old.depth * 0.3
            g._superseded_by[dup] = mid
        g.memories[mid] = mem
        for concept in mg._sanitize_keys(keys):
            g._link(self.key(concept, types_.get(concept, "concept"), embed), mid)
        if self.keys.ids:
            sims = self.keys.matrix @ emb
            for i in np.nonzero(sims >= mg.KEY_AUTO_LINK_THRESHOLD)[0]:
                g._link(self.keys.ids[int(i)], mid)
        self.mems.add(mid, emb)
        return mid


def dataset(
    conversations: Sequence[locomo.Conversation], size: int
) -> tuple[list[tuple[str, str]], list[locomo.Question]]:
    """All dev turns (ids ``conv:dia``) plus synthetic distractors up to ``size``."""
    import corpus

    items = [(f"{c.id}:{t.dia_id}", t.text) for c in conversations for t in c.turns]
    fill = corpus.memories(max(0, size - len(items)), seed=99)
    items += [(f"syn:{i}", m.text) for i, m in enumerate(fill)]
    questions = [
        locomo.Question(q.text, {f"{c.id}:{g}" for g in q.gold}, q.category)
        for c in conversations
        for q in c.questions
    ]
    return items[:size], questions


def pick(questions: list[locomo.Question], n: int) -> list[locomo.Question]:
    """``n`` questions spread evenly over the list (deterministic)."""
    if n >= len(questions):
        return questions
    step = len(questions) / n
    return [questions[int(i * step)] for i in range(n)]


def compare(
    conversations: Sequence[locomo.Conversation],
    embedder: locomo.CachingEmbedder,
    root: Path,
    size: int,
    n_questions: int,
) -> dict[str, Any]:
    """Smriti and mcp-super-memory on the same ``size`` memories and questions."""
    from common import plugin_manager
    from quality import Restorer, load_memories, open_engine, prime

    from smriti.default_plugins.heuristic_extractor import HeuristicExtractor

    items, all_questions = dataset(conversations, size)
    questions = pick(all_questions, n_questions)
    prime(embedder, [t for _, t in items] + [q.text for q in questions])
    result: dict[str, Any] = {"memories": len(items), "questions": len(questions)}

    engine = open_engine("peer", str(root), embedder, plugin_manager())
    try:
        store_s = load_memories(engine, [(i, t, None) for i, t in items])
        restorer = Restorer(engine)
        smriti_lat, smriti_tally = [], locomo.Tally()
        for q in questions:
            started = time.perf_counter()
            found = restorer.recall(q.text, 10)
            smriti_lat.append(time.perf_counter() - started - restorer.last_restore_s)
            smriti_tally.add(q.category, locomo.scores([r.engram.source for r in found], q.gold))
        result["smriti"] = {
            "store": latency_summary(store_s),
            "recall": latency_summary(smriti_lat),
            "quality": smriti_tally.means(),
        }
    finally:
        engine.close()

    mg = load_module(root / "super-memory", embedder)
    extractor = HeuristicExtractor()
    graph = mg.MemoryGraph()
    loop = asyncio.new_event_loop()
    add_s, sources = [], {}
    loader = None
    for n, (source, text) in enumerate(items):
        refs = extractor.extract(text).cues
        keys = [c.name for c in refs]
        kinds = {c.name: ("name" if c.cue_type == "entity" else "concept") for c in refs}
        if n < REAL_ADDS:
            started = time.perf_counter()
            mid, _ = loop.run_until_complete(graph.add(text, keys, key_types=kinds))
            add_s.append(time.perf_counter() - started)
        else:
            loader = loader or FastLoader(mg, graph)
            mid = loader.add(text, keys, kinds, mg.embed_text)
        sources[mid] = source
    result["super_memory"] = {
        "store_real_add": latency_summary(add_s),
        "superseded": len(graph._superseded_by),
        "keys": len(graph.keys),
    }
    # As shipped, every recall rewrites the whole graph as JSON: latency on a few questions.
    for label, asked in (
        ("as_shipped", questions[:AS_SHIPPED_QUESTIONS]),
        ("in_memory", questions),
    ):
        if label == "in_memory":
            graph.save = _no_save
        lat, tally = [], locomo.Tally()
        for q in asked:
            saved = {
                m: (v.depth, v.access_count, v.last_accessed) for m, v in graph.memories.items()
            }
            started = time.perf_counter()
            found = loop.run_until_complete(graph.recall(q.text, top_k=10))
            lat.append(time.perf_counter() - started)
            ranking = [sources.get(r["id"], "") for r in found]
            tally.add(q.category, locomo.scores(ranking, q.gold))
            for r in found:
                m = graph.memories[r["id"]]
                m.depth, m.access_count, m.last_accessed = saved[r["id"]]
        result["super_memory"][f"recall_{label}"] = latency_summary(lat)
        if label == "in_memory":
            result["super_memory"]["quality"] = tally.means()
    loop.close()
    smriti_p50 = result["smriti"]["recall"]["p50_ms"]
    for label in ("as_shipped", "in_memory"):
        p50 = result["super_memory"][f"recall_{label}"]["p50_ms"]
        result[f"latency_ratio_{label}"] = round(p50 / smriti_p50, 3) if smriti_p50 else None
    return result


async def _no_save() -> None:
    return None


def print_peer(result: dict[str, Any]) -> None:
    """The peer comparison table."""
    s, p = result["smriti"], result["super_memory"]
    rows = [
        ["Smriti (Kùzu)", s["recall"]["p50_ms"], s["recall"]["p95_ms"],
         s["quality"]["overall"]["R@10"], s["quality"]["overall"]["MRR"]],
        ["mcp-super-memory (as shipped, JSON save per recall)",
         p["recall_as_shipped"]["p50_ms"], p["recall_as_shipped"]["p95_ms"],
         p["quality"]["overall"]["R@10"], p["quality"]["overall"]["MRR"]],
        ["mcp-super-memory (in memory)", p["recall_in_memory"]["p50_ms"],
         p["recall_in_memory"]["p95_ms"], p["quality"]["overall"]["R@10"],
         p["quality"]["overall"]["MRR"]],
    ]  # fmt: skip
    print(f"\nPeer comparison: {result['memories']} memories, {result['questions']} questions")
    print(table(["system", "recall p50 ms", "recall p95 ms", "R@10", "MRR"], rows))
    print(
        f"latency ratio super-memory/Smriti (p50): as shipped {result['latency_ratio_as_shipped']}"
        f", in memory {result['latency_ratio_in_memory']}"
    )
