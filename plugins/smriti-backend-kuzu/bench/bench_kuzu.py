"""Benchmark the Kùzu backend through the engine: import, store, recall, search, consolidate.

Usage (from the repository root, Python 3.12)::

    OPENBLAS_NUM_THREADS=1 uv run python plugins/smriti-backend-kuzu/bench/bench_kuzu.py \
        --n 10000 --json /tmp/kuzu-10k.json [--label after] [--no-consolidate]

Builds N memories of generated text (topic words plus a Zipf-distributed general
vocabulary, some capitalised names, 0-2 tags) with the built-in lexical embedder's
384-d vectors, loads them with ``import_records`` (cues from the heuristic extractor,
CoOccurs counted as the engine would, associations to earlier memories of the same
topic), then measures through ``smriti.engine.Engine``: store, recall (associative),
search and list latencies with **embedding excluded** (vectors are computed before the
timed call and served from a memo), backend text/vector search, consolidation with
Leiden, reopen time and peak RSS. Prints a table on stdout and writes JSON.

To measure another version of the plugin side by side, run this same script with
``PYTHONPATH=<other checkout>/plugins/smriti-backend-kuzu`` (PYTHONPATH wins over the
editable install).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from smriti.config import Settings
from smriti.default_plugins.heuristic_extractor import HeuristicExtractor
from smriti.default_plugins.lexical_embedder import LexicalEmbedder
from smriti.engine import Engine
from smriti.model import Association, CoOccurrence, Cue, Engram, Link, normalise_cue_name
from smriti.plugins import create_plugin_manager

SYLLABLES = [
    "ka", "lo", "mi", "ren", "tu", "sa", "vor", "li", "den", "po", "qua", "zel", "mar",
    "ti", "bon", "ex", "ul", "gra", "fen", "so", "dri", "nak", "pel", "rho", "sim", "ta",
]  # fmt: skip
TYPES = ("episodic", "semantic", "procedural")


class Corpus:
    """Deterministic generated memories: topics, Zipf general words, names and tags."""

    def __init__(self, seed: int = 7, topics: int = 300, general: int = 6000) -> None:
        rng = np.random.default_rng(seed)
        words: list[str] = []
        seen: set[str] = set()
        while len(words) < topics * 30 + general + 400:
            w = "".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 4))))
            if w not in seen:
                seen.add(w)
                words.append(w)
        self.topic_words = [words[t * 30 : (t + 1) * 30] for t in range(topics)]
        base = topics * 30
        self.general = words[base : base + general]
        self.names = [w.capitalize() for w in words[base + general : base + general + 300]]
        self.tags = words[base + general + 300 : base + general + 400]
        zipf = 1.0 / np.arange(1, general + 1) ** 1.05
        self.zipf = zipf / zipf.sum()
        self.topics = topics

    def text(self, i: int) -> tuple[str, int, list[str]]:
        """(content, topic, tags) of memory ``i``."""
        rng = np.random.default_rng(1_000_003 * i + 17)
        topic = int(rng.integers(self.topics))
        parts = list(rng.choice(self.topic_words[topic], size=int(rng.integers(3, 6))))
        parts += list(rng.choice(self.general, size=int(rng.integers(6, 12)), p=self.zipf))
        rng.shuffle(parts)
        if rng.random() < 0.4:
            parts.insert(int(rng.integers(len(parts))), str(rng.choice(self.names)))
        tags = [str(t) for t in rng.choice(self.tags, size=int(rng.integers(0, 3)), replace=False)]
        return " ".join(str(p) for p in parts) + ".", topic, tags

    def query(self, i: int) -> str:
        """A recall query: two topic words and one or two general words."""
        rng = np.random.default_rng(7_000_001 * i + 3)
        topic = int(rng.integers(self.topics))
        words = list(rng.choice(self.topic_words[topic], size=2, replace=False))
        words += list(rng.choice(self.general[:2000], size=int(rng.integers(1, 3))))
        return "what about " + " ".join(str(w) for w in words)


def build_records(
    corpus: Corpus, n: int, cues_per_memory: int, embedder: LexicalEmbedder
) -> tuple[list[Engram], list[Cue], list[Link], list[Association], list[CoOccurrence]]:
    """The records ``import_records`` gets: what n engine stores would have written."""
    extractor = HeuristicExtractor()
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    texts, topics, tag_lists = [], [], []
    for i in range(n):
        text, topic, tags = corpus.text(i)
        texts.append(text)
        topics.append(topic)
        tag_lists.append(tags)
    vectors = np.concatenate([embedder.embed(texts[i : i + 2000]) for i in range(0, n, 2000)])
    cue_ids: dict[str, str] = {}
    cue_types: dict[str, str] = {}
    links: list[Link] = []
    pairs: Counter[tuple[str, str]] = Counter()
    engrams: list[Engram] = []
    last_of_topic: dict[int, list[int]] = {}
    assocs: list[Association] = []
    for i, text in enumerate(texts):
        ext = extractor.extract(text)
        names: list[str] = []
        for ref in ext.cues[:cues_per_memory]:
            name = normalise_cue_name(ref.name)
            if name and name not in names:
                names.append(name)
                cue_types.setdefault(name, ref.cue_type)
        for tag in tag_lists[i]:
            name = normalise_cue_name(tag)
            if name not in names:
                names.append(name)
                cue_types.setdefault(name, "context")
        eid = f"m{i:07d}"
        ids = [cue_ids.setdefault(name, f"c{len(cue_ids):06d}") for name in names]
        links += [Link(eid, c) for c in ids]
        for a in ids:
            for b in ids:
                if a != b:
                    pairs[(a, b)] += 1
        created = t0 + timedelta(minutes=i)
        engrams.append(
            Engram(
                id=eid,
                content=text,
                summary=text[:80],
                memory_type=TYPES[i % 3] if ext.memory_type not in TYPES else ext.memory_type,
                importance=round(0.2 + (i * 37 % 71) / 100, 3),
                access_count=i % 5,
                created_at=created,
                last_accessed_at=created + timedelta(hours=i % 48),
                decay_factor=1.0,
                embedding=vectors[i],
                source="bench",
                tags=tag_lists[i],
                cluster_id=-1,
            )
        )
        earlier = last_of_topic.setdefault(topics[i], [])
        for j in earlier[-2:]:
            assocs.append(
                Association(eid, f"m{j:07d}", 0.7 + (i + j) % 25 / 100, "semantic", created)
            )
        earlier.append(i)
    names = list(cue_ids)
    cue_vecs = np.concatenate(
        [embedder.embed(names[i : i + 2000]) for i in range(0, len(names), 2000)]
    )
    cues = [Cue(cue_ids[nm], nm, cue_types[nm], cue_vecs[k]) for k, nm in enumerate(names)]
    cooc = [CoOccurrence(a, b, float(c)) for (a, b), c in pairs.items()]
    return engrams, cues, links, assocs, cooc


class MemoEmbedder:
    """Wraps an embedder so that timed calls are served from precomputed vectors."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.memo: dict[str, np.ndarray] = {}

    def warm(self, texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self.memo[t] = v

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.warm(texts)
        return np.stack([self.memo[t] for t in texts])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size in MB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open("/proc/self/statm") as f:
        current = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return round(current, 1), round(peak, 1)


def lat(fn: Callable[[int], object], count: int) -> dict[str, float]:
    """p50/p95/mean in ms of ``fn(i)`` for i in range(count), after one warm-up call."""
    fn(-1)
    out = []
    for i in range(count):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    ms = np.asarray(out) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
        "mean_ms": round(float(ms.mean()), 2),
        "n": count,
    }


def make_engine(root: Path) -> Engine:
    import smriti_backend_kuzu.plugin as kuzu_plugin

    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(kuzu_plugin, name="smriti-backend-kuzu")
    env = {
        "STORAGE_LOCATION": str(root),
        "ACCESSING_USER": "bench",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_SYNC_INTERVAL": "0",
        "LOG_LEVEL": "warning",
    }
    engine = Engine.from_settings(Settings.from_env(env), pm=pm)
    engine.embedder = MemoEmbedder(engine.embedder)  # type: ignore[assignment]
    return engine


def run(args: argparse.Namespace) -> dict[str, Any]:
    from smriti.logs import configure_logging

    configure_logging("warning")
    import smriti_backend_kuzu

    out: dict[str, Any] = {
        "label": args.label,
        "n": args.n,
        "plugin": str(Path(smriti_backend_kuzu.__file__).parent),
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "loadavg": os.getloadavg()[0],
    }
    corpus = Corpus()
    embedder = LexicalEmbedder()
    t = time.perf_counter()
    records = build_records(corpus, args.n, args.cues_per_memory, embedder)
    out["generate_s"] = round(time.perf_counter() - t, 1)
    kinds = ("engrams", "cues", "links", "associations", "cooccurrences")
    out["records"] = {k: len(v) for k, v in zip(kinds, records, strict=True)}
    tmp = tempfile.TemporaryDirectory(dir=args.tmp)
    root = Path(tmp.name)
    engine = make_engine(root)
    engine.open()
    backend = engine.backend
    gc.collect()
    t = time.perf_counter()
    backend.import_records(*records)
    took = time.perf_counter() - t
    out["import_s"] = round(took, 2)
    out["import_per_s"] = round(args.n / took)
    del records
    gc.collect()
    engine._size = backend.count_engrams()
    t = time.perf_counter()
    out["ensure_indexes"] = backend.ensure_indexes(embedder.dims, engine.settings.index_threshold)
    out["ensure_indexes_s"] = round(time.perf_counter() - t, 2)

    queries = [corpus.query(i) for i in range(args.queries)]
    extractor = engine.extractor
    names = [
        normalise_cue_name(c.name) for q in queries for c in extractor.extract(q, query=True).cues
    ]
    engine.embedder.warm(queries + ["warm up query"] + names)  # type: ignore[attr-defined]
    store_texts = [corpus.text(args.n + i)[0] for i in range(args.stores + 1)]
    engine.embedder.warm(store_texts)  # type: ignore[attr-defined]
    for text in store_texts:
        engine.embedder.warm([normalise_cue_name(c.name) for c in extractor.extract(text).cues])  # type: ignore[attr-defined]

    def q(i: int) -> str:
        return queries[i] if i >= 0 else "warm up query"

    res: dict[str, Any] = {}
    res["engine.store"] = lat(
        lambda i: engine.store(store_texts[i + 1], tags=["bench"]), args.stores
    )
    res["engine.recall"] = lat(lambda i: engine.recall(q(i), limit=5), args.queries)
    res["engine.search"] = lat(lambda i: engine.recall(q(i), limit=5, mode="search"), args.queries)
    res["engine.list"] = lat(lambda i: engine.recall(None, limit=10, mode="list"), 30)
    res["backend.text_search"] = lat(lambda i: backend.reader.text_search(q(i), 10), args.queries)
    vecs = [engine.embedder.memo[q(i)] for i in range(-1, args.queries)]  # type: ignore[attr-defined]
    res["backend.vector_search"] = lat(
        lambda i: backend.reader.vector_search(vecs[i + 1], 10), args.queries
    )
    out["latency"] = res
    out["rss_after_queries_mb"], out["peak_rss_mb"] = rss_mb()
    if args.profile:
        from pyinstrument import Profiler

        prof = Profiler(interval=0.0005)
        prof.start()
        for i in range(min(40, args.queries)):
            engine.recall(q(i), limit=5)
        for i in range(min(20, args.stores)):
            engine.store(store_texts[i + 1] + " again", tags=["bench"])
        prof.stop()
        Path(args.profile).write_text(prof.output_text(unicode=False, color=False, show_all=False))
    if args.consolidate:
        prof = None
        if args.profile:
            from pyinstrument import Profiler

            prof = Profiler(interval=0.001)
            prof.start()
        t = time.perf_counter()
        report = engine.consolidate()
        out["consolidate_s"] = round(time.perf_counter() - t, 2)
        if prof is not None:
            prof.stop()
            text = prof.output_text(unicode=False, color=False)
            Path(args.profile + ".consolidate").write_text(text)
        out["consolidate"] = {k: v for k, v in report.to_dict().items() if k != "seconds"}
    out["rss_end_mb"], out["peak_rss_mb"] = rss_mb()
    engine.close()
    t = time.perf_counter()
    engine = make_engine(root)
    engine.open()
    out["reopen_s"] = round(time.perf_counter() - t, 2)
    engine.close()
    tmp.cleanup()
    return out


def table(out: dict[str, Any]) -> str:
    lines = [f"## {out['label']}  n={out['n']}  (load {out['loadavg']:.1f})", ""]
    lines.append("| metric | p50 ms | p95 ms | mean ms |")
    lines.append("|---|---|---|---|")
    for name, r in out["latency"].items():
        lines.append(f"| {name} | {r['p50_ms']} | {r['p95_ms']} | {r['mean_ms']} |")
    lines.append("")
    for key in ("import_s", "import_per_s", "ensure_indexes_s", "consolidate_s", "reopen_s",
                "rss_end_mb", "peak_rss_mb"):  # fmt: skip
        if key in out:
            lines.append(f"- {key}: {out[key]}")
    lines.append(f"- records: {out['records']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--stores", type=int, default=100)
    p.add_argument("--cues-per-memory", type=int, default=5)
    p.add_argument("--label", default="current")
    p.add_argument("--json", default="")
    p.add_argument("--profile", default="", help="write a pyinstrument text profile here")
    p.add_argument("--tmp", default=None, help="directory for the temporary store")
    p.add_argument("--no-consolidate", dest="consolidate", action="store_false")
    args = p.parse_args(argv)
    out = run(args)
    print(table(out))
    sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
