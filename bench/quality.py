"""Retrieval quality on LoCoMo (dev split): Smriti recall against BM25, dense and RRF.

Per conversation, every turn is stored through ``Engine.store`` on Kùzu (the full store
pipeline: heuristic cues, embeddings, associations), the memory's ``source`` is its
``dia_id``, its ``occurred_at`` the session's date (plus the turn's index in seconds, so
turns keep their order) and its last access is set to the same time. One consolidation then runs
(decay, Leiden clusters), as the hourly job would have. Each question is recalled with
``mode=recall, limit=10``.

Fairness of access strengthening: recall strengthens what it returns (access count,
last access = now, decay + 0.05), which would let earlier questions bias later ones
(recency weight 0.2). After every question the returned memories' access fields are
restored from a snapshot taken before the first question, so every question sees the
same store. The restore is a benchmark device, not engine behaviour.

Baselines on the same turns and the same embedder, in the same run: BM25 over the turn
texts, dense cosine, and their reciprocal-rank fusion (k = 60).

Usage::

    uv run python bench/quality.py                       # the default local model (fetched)
    uv run python bench/quality.py --embedder lexical    # built-in lexical embedder
    uv run python bench/quality.py --peer                # + mcp-super-memory at 5,000
    uv run python bench/quality.py --compare "pool10:recall.POOL_PER_RESULT=10"

``--compare NAME:module.CONSTANT=VALUE[,...]`` (repeatable) adds a row "Smriti NAME":
recall with those constants of ``smriti.engine.<module>`` changed, asked each question
right after the unchanged recall on the same store (paired: the stores differ from run
to run, see bench/README.md).

Results: tables on stdout, JSON in bench/results/quality-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402
import numpy as np  # noqa: E402
import structlog  # noqa: E402
from common import (  # noqa: E402
    configure_logging,
    latency_summary,
    machine,
    model_dir,
    plugin_manager,
    table,
    write_results,
)

log = structlog.get_logger("bench.quality")
#: Extra settings of every engine (``--set KEY=VALUE``), for ablations.
SETTINGS: dict[str, str] = {}
#: Variants of recall measured beside it on the same stores (``--compare``): name →
#: {(module of smriti.engine, constant): value}.
COMPARE: dict[str, dict[tuple[str, str], float]] = {}
#: The recall pipeline's modules whose constants ``--compare`` may change.
TUNABLE = ("recall", "fusion", "scoring", "when", "contiguity", "query")
Ranker = Callable[[str], list[str]]


def parse_compare(spec: str) -> tuple[str, dict[tuple[str, str], float]]:
    """``NAME:module.CONSTANT=VALUE[,...]`` as (name, patches); a clear error otherwise."""
    name, _, body = spec.partition(":")
    patches: dict[tuple[str, str], float] = {}
    for item in filter(None, body.split(",")):
        key, _, value = item.partition("=")
        module, _, constant = key.strip().partition(".")
        target = importlib.import_module(f"smriti.engine.{module}") if module in TUNABLE else None
        if target is None or not hasattr(target, constant):
            raise SystemExit(f"--compare {spec!r}: {key!r} is not a constant of {TUNABLE}")
        try:
            patches[(module, constant)] = float(value)
        except ValueError:
            raise SystemExit(f"--compare {spec!r}: {value!r} is not a number") from None
    if not name or not patches:
        raise SystemExit(f"--compare {spec!r}: write NAME:module.CONSTANT=VALUE[,...]")
    return name, patches


@contextmanager
def patched(patches: dict[tuple[str, str], float]) -> Iterator[None]:
    """The recall pipeline with ``patches`` applied (ints stay ints), then restored."""
    saved = {}
    for (module, constant), value in patches.items():
        target = importlib.import_module(f"smriti.engine.{module}")
        saved[(target, constant)] = old = getattr(target, constant)
        setattr(target, constant, type(old)(value) if isinstance(old, int | float) else value)
    try:
        yield
    finally:
        for (target, constant), old in saved.items():
            setattr(target, constant, old)


def make_embedder(kind: str, directory: str | None) -> locomo.CachingEmbedder:
    """The cached embedder all systems share: ``local`` (the default model) or ``lexical``."""
    if kind == "lexical":
        from smriti.default_plugins.lexical_embedder import LexicalEmbedder

        return locomo.CachingEmbedder(LexicalEmbedder())
    from smriti_embedder_local import LocalEmbedder

    from smriti.config import Settings

    settings = Settings.from_env({"SMRITI_LOCAL_MODEL": str(model_dir(directory))})
    return locomo.CachingEmbedder(LocalEmbedder.from_settings(settings, explicit=True))


def open_engine(user: str, root: str, embedder: locomo.CachingEmbedder, pm: Any) -> Any:
    """An Engine on Kùzu under ``root`` that embeds through the shared cache."""
    from smriti.config import Settings
    from smriti.engine.core import Engine

    settings = Settings.from_env(
        {
            "ACCESSING_USER": user,
            "STORAGE_LOCATION": root,
            "DB_TYPE": "kuzu",
            "SMRITI_EMBEDDER": "lexical",  # replaced below by the shared cached embedder
            "SMRITI_CUE_EXTRACTOR": "heuristic",
            "CONSOLIDATION_INTERVAL": "0",
            **SETTINGS,
        }
    )
    engine = Engine.from_settings(settings, pm)
    engine.embedder = embedder
    return engine.open()


def load_memories(engine: Any, items: Sequence[tuple[str, str, Any]]) -> list[float]:
    """Store (id, text, when) items through the engine; return store latencies."""
    from smriti.model import EngramUpdate

    seconds: list[float] = []
    updates = []
    for source, text, when in items:
        started = time.perf_counter()
        outcome = engine.store(text, source=source, occurred_at=when)
        seconds.append(time.perf_counter() - started)
        if when is not None:
            updates.append(EngramUpdate(outcome.engram.id, last_accessed_at=when))
    for i in range(0, len(updates), 2000):
        engine.backend.update_engrams(updates[i : i + 2000])
    return seconds


class Restorer:
    """Puts returned memories' access fields back after each recall (see module doc)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.stats = {s.id: s for s in engine.backend.engram_stats()}
        self.last_restore_s = 0.0

    def recall(self, query: str, limit: int = 10) -> list[Any]:
        """``engine.recall`` then restore what it strengthened."""
        from smriti.model import EngramUpdate

        results = self.engine.recall(query, limit=limit)
        started = time.perf_counter()
        updates = [
            EngramUpdate(
                r.engram.id,
                access_count=self.stats[r.engram.id].access_count,
                last_accessed_at=self.stats[r.engram.id].last_accessed_at,
                decay_factor=self.stats[r.engram.id].decay_factor,
            )
            for r in results
            if r.engram.id in self.stats
        ]
        if updates:
            self.engine.backend.update_engrams(updates)
        self.last_restore_s = time.perf_counter() - started
        return results


def prime(embedder: locomo.CachingEmbedder, texts: Sequence[str]) -> None:
    """Embed contents, questions and all their heuristic cues in large batches."""
    from smriti.default_plugins.heuristic_extractor import HeuristicExtractor
    from smriti.engine.store import clean_cues

    extractor = HeuristicExtractor()
    cues = {c.name for t in texts for c in clean_cues(extractor.extract(t).cues, [])}
    started = time.perf_counter()
    embedder.prime([*texts, *sorted(cues)])
    log.warning(
        "embeddings ready",
        texts=len(texts) + len(cues),
        seconds=round(time.perf_counter() - started, 1),
    )


def evaluate(
    conversations: Sequence[locomo.Conversation],
    embedder: locomo.CachingEmbedder,
    root: str,
    variants: bool = False,
) -> dict[str, Any]:
    """Every system on every conversation: tallies, latencies and counts."""
    pm = plugin_manager()
    tallies: dict[str, locomo.Tally] = {}
    timing: dict[str, list[float]] = {"store": [], "recall": []}
    for conv in conversations:
        ids = [t.dia_id for t in conv.turns]
        texts = [t.text for t in conv.turns]
        bm25 = locomo.BM25(ids, texts)
        matrix = embedder.embed(texts)
        engine = open_engine(conv.id.replace("conv-", "conv"), root, embedder, pm)
        try:
            timing["store"] += load_memories(
                engine, [(t.dia_id, t.text, t.when) for t in conv.turns]
            )
            engine.consolidate()
            restorer = Restorer(engine)
            for q in conv.questions:
                qvec = embedder.embed([q.text])[0]
                lexical = bm25.rank(q.text)
                dense = locomo.dense_rank(ids, matrix, qvec)
                started = time.perf_counter()
                recalled = [r.engram.source for r in restorer.recall(q.text, 10)]
                timing["recall"].append(time.perf_counter() - started - restorer.last_restore_s)
                rankings = {
                    "BM25": lexical,
                    "dense": dense,
                    "RRF(BM25,dense)": locomo.rrf(lexical, dense),
                    "Smriti recall": recalled,
                }
                for name, patches in COMPARE.items():
                    with patched(patches):
                        found = restorer.recall(q.text, 10)
                    rankings[f"Smriti {name}"] = [r.engram.source for r in found]
                if variants:
                    rankings.update(variant_rankings(engine, q.text))
                for system, ranking in rankings.items():
                    tallies.setdefault(system, locomo.Tally()).add(
                        q.category, locomo.scores(ranking, q.gold)
                    )
        finally:
            engine.close()
        log.warning("conversation done", conversation=conv.id, questions=len(conv.questions))
    return {
        "systems": {name: t.means() for name, t in tallies.items()},
        "store_latency": latency_summary(timing["store"]),
        "recall_latency": latency_summary(timing["recall"]),
    }


def variant_rankings(engine: Any, text: str) -> dict[str, list[str]]:
    """Rankings under the scoring experiments of bench/variants.py (no strengthening)."""
    import variants as v

    out = {}
    for k_factor in (2, 5):
        ch = v.channels(engine, text, 10, k_factor)
        for rule in v.RULES:
            out[f"exp {rule} k={k_factor}x"] = [e.source for e in v.ranked(engine, ch, rule, 10)]
    ch = v.channels(engine, text, 10, 2, hops=False)
    out["exp current no-hops"] = [e.source for e in v.ranked(engine, ch, "current", 10)]
    return out


def print_quality(systems: dict[str, dict[str, dict[str, float]]]) -> None:
    """Per-category tables, one row per system."""
    groups = [*locomo.CATEGORIES.values(), "overall"]
    for group in groups:
        rows = []
        for name, means in systems.items():
            m = means.get(group)
            if m:
                rows.append([name, *(m[k] for k in locomo.METRICS), int(m["n"])])
        if not rows:
            continue
        print(f"\n{group}")
        print(table(["system", *locomo.METRICS, "n"], rows))


def main(argv: Sequence[str] | None = None) -> None:
    """Run the LoCoMo evaluation (and optionally the peer comparison)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--embedder", choices=("local", "lexical"), default="local")
    p.add_argument(
        "--model-dir", default=None, help="model directory (default: the default model's, fetched)"
    )
    p.add_argument("--data", type=Path, default=locomo.DATA)
    p.add_argument("--conversations", default="", help="comma-separated sample ids")
    p.add_argument("--variants", action="store_true", help="scoring experiments (variants.py)")
    p.add_argument("--peer", action="store_true", help="also compare with mcp-super-memory")
    p.add_argument("--peer-only", action="store_true", help="only the peer comparison")
    p.add_argument("--peer-size", type=int, default=5000)
    p.add_argument("--peer-questions", type=int, default=300)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE engine setting")
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        help="NAME:module.CONSTANT=VALUE[,...]: recall with these constants of smriti.engine"
        " changed, on the same stores as the others (paired)",
    )
    p.add_argument("--log-level", default="warning")
    args = p.parse_args(argv)
    for item in args.set:
        key, _, value = item.partition("=")
        SETTINGS[key.strip()] = value.strip()
    COMPARE.update(parse_compare(spec) for spec in args.compare)
    configure_logging(args.log_level)
    conversations = locomo.load(args.data)
    if args.conversations:
        wanted = set(args.conversations.split(","))
        conversations = [c for c in conversations if c.id in wanted]
    embedder = make_embedder(args.embedder, args.model_dir)
    texts = [t.text for c in conversations for t in c.turns]
    prime(embedder, texts + [q.text for c in conversations for q in c.questions])
    payload: dict[str, Any] = {"machine": machine(), "args": vars(args), "model": embedder.model_id}
    with tempfile.TemporaryDirectory(prefix="smriti-quality-") as root:
        if not args.peer_only:
            result = evaluate(conversations, embedder, root, args.variants)
            payload["locomo"] = result
            print(f"LoCoMo dev, turn = memory, embedder {embedder.model_id}")
            print_quality(result["systems"])
            print(
                f"\nSmriti store p50/p95 ms: {result['store_latency']['p50_ms']}"
                f" / {result['store_latency']['p95_ms']}; recall p50/p95 ms: "
                f"{result['recall_latency']['p50_ms']} / {result['recall_latency']['p95_ms']}"
            )
        if args.peer or args.peer_only:
            import peer

            payload["peer"] = peer.compare(
                conversations, embedder, Path(root), args.peer_size, args.peer_questions
            )
            peer.print_peer(payload["peer"])
    embedder.save()
    print(f"results: {write_results('quality', payload, args.out)}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
