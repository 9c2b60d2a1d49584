"""Would a turn embedded with the turn before it be found more often? (LoCoMo, both halves)

A conversational turn often means little alone ("Yeah, they're the ones performing at
the festival!"); the turn before it says what it is about. This measures, without
changing the engine, a memory vector that encodes that context: the unit mean of the
turn's own embedding and the embedding of the previous turn of the same session
followed by the turn ("mixed").

Two views, each on the tuning and the hold-out half:

- dense: every turn ranked by cosine to the question, with the own, the in-context and
  the mixed vectors (the dense baseline of ``quality.py`` and two variants);
- pools (with ``--pools``, dumps written by ``pools.py --dump``): recall's own ranking
  against the same pools with each direct hit's cosine to the query taken from its
  mixed vector, the fused similarity and the composite score changed accordingly (on
  the engine's common scale). Like every ``pools.py`` rule this only reorders the pool
  recall scored.

Usage::

    uv run python bench/context_vectors.py \\
        --pools conv-26,conv-41,conv-43=/tmp/tune.json --pools conv-30,conv-42=/tmp/hold.json

Results: tables on stdout, JSON in bench/results/context_vectors-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402
import numpy as np  # noqa: E402
import quality  # noqa: E402
from common import configure_logging, machine, table, write_results  # noqa: E402
from pools import SIMILARITY_WEIGHT, ranked  # noqa: E402

HALVES = {"tuning": "conv-26,conv-41,conv-43", "hold-out": "conv-30,conv-42"}
SHOWN = ("R@1", "R@10", "MRR", "sR@5")


def in_context(conversation: locomo.Conversation) -> list[str]:
    """Each turn preceded by the turn before it in the same session (the first alone)."""
    out, before, session = [], None, None
    for turn in conversation.turns:
        here = locomo.session_of(turn.dia_id)
        out.append(f"{before}\n{turn.text}" if before and here == session else turn.text)
        before, session = turn.text, here
    return out


def units(embedder: locomo.CachingEmbedder, texts: list[str]) -> np.ndarray:
    rows = embedder.embed(texts).astype(np.float64)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def vectors(
    embedder: locomo.CachingEmbedder, conversation: locomo.Conversation
) -> dict[str, np.ndarray]:
    """The own, in-context and mixed vector of every turn, row i for turn i."""
    own = units(embedder, [t.text for t in conversation.turns])
    context = units(embedder, in_context(conversation))
    mixed = own + context
    return {"own": own, "context": context, "mixed": mixed / np.linalg.norm(mixed, axis=1)[:, None]}


def dense(embedder: locomo.CachingEmbedder, conversations: list[locomo.Conversation]) -> dict:
    tallies = {kind: locomo.Tally() for kind in ("own", "context", "mixed")}
    for conversation in conversations:
        sources = [t.dia_id for t in conversation.turns]
        by_kind = vectors(embedder, conversation)
        for question in conversation.questions:
            query = units(embedder, [question.text])[0]
            for kind, rows in by_kind.items():
                order = [sources[i] for i in np.argsort(-(rows @ query), kind="stable")]
                tallies[kind].add(question.category, locomo.scores(order, set(question.gold)))
    return {f"dense {kind}": t.means() for kind, t in tallies.items()}


def rescored(
    embedder: locomo.CachingEmbedder, conversations: list[locomo.Conversation], path: Path
) -> dict:
    """The engine's ranking of a ``pools.py`` dump, and the same pools with mixed vectors."""
    from smriti.embedding import SimilarityScale
    from smriti.engine import fusion

    rows = json.loads(path.read_text(encoding="utf-8"))
    common = SimilarityScale(embedder.similarity_baseline).common
    share = fusion.VECTOR_WEIGHT / (
        fusion.VECTOR_WEIGHT + fusion.LEXICAL_WEIGHT + fusion.CUE_WEIGHT
    )
    questions = [(c, q) for c in conversations for q in c.questions]
    if len(questions) != len(rows):
        raise SystemExit(f"{path}: {len(rows)} pools for {len(questions)} questions")
    engine, mixed = locomo.Tally(), locomo.Tally()
    kept: dict[str, dict[str, np.ndarray]] = {}
    for (conversation, question), row in zip(questions, rows, strict=True):
        if row["question"] != question.text:
            raise SystemExit(f"{path} was not dumped for these conversations")
        if conversation.id not in kept:
            rows_mixed = vectors(embedder, conversation)["mixed"]
            sources = [t.dia_id for t in conversation.turns]
            kept[conversation.id] = dict(zip(sources, rows_mixed, strict=True))
        query = units(embedder, [question.text])[0]
        gains: dict[str, float] = {}
        for c in row["pool"]:
            # A hop's similarity comes from the memory that reached it, not its cosine.
            if c["hop"] > 0 and c["match"] != "context":
                gains[c["id"]] = 0.0
                continue
            cosine = float(kept[conversation.id][c["source"]] @ query)
            change = share * (max(0.0, common(cosine)) - max(0.0, common(c["cos"])))
            gains[c["id"]] = SIMILARITY_WEIGHT * change

        def rule(c: dict[str, Any], _: dict[str, Any], gains: dict[str, float] = gains) -> float:
            return c["score"] + gains[c["id"]]

        gold = set(row["gold"])
        engine.add(row["category"], locomo.scores(ranked(row, lambda c, _: c["score"]), gold))
        mixed.add(row["category"], locomo.scores(ranked(row, rule), gold))
    return {"pools: engine": engine.means(), "pools: mixed vectors": mixed.means()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model-dir", default=None, help="model directory (default: bench model)")
    p.add_argument(
        "--pools",
        action="append",
        default=[],
        metavar="CONVERSATIONS=PATH",
        help="a pools.py dump and the conversations it was made from (repeatable)",
    )
    p.add_argument("--out", type=Path, default=None, help="figures JSON (default bench/results)")
    args = p.parse_args()
    configure_logging("warning")
    embedder = quality.make_embedder("local", args.model_dir)
    everything = {c.id: c for c in locomo.load(locomo.DATA)}
    dumps = [spec.rsplit("=", 1) for spec in args.pools]
    if any(len(d) != 2 or not d[0] for d in dumps):
        raise SystemExit("--pools: write CONVERSATIONS=PATH")
    texts = [
        text
        for c in everything.values()
        for text in (*in_context(c), *(t.text for t in c.turns), *(q.text for q in c.questions))
    ]
    embedder.prime(texts)
    figures: dict[str, Any] = {}
    for name, ids in HALVES.items():
        figures[name] = dense(embedder, [everything[i] for i in ids.split(",")])
    for ids, path in dumps:
        chosen = [everything[i] for i in ids.split(",")]
        figures[f"pools of {ids}"] = rescored(embedder, chosen, Path(path))
    for name, systems in figures.items():
        lines = [
            [system, group, *(m[group][k] for k in SHOWN)]
            for system, m in systems.items()
            for group in ("overall", "multi-hop")
        ]
        print(f"\n{name}\n{table(['system', 'questions', *SHOWN], lines)}")
    payload = {"machine": machine(), "args": vars(args), "figures": figures}
    print(f"results: {write_results('context_vectors', payload, args.out)}")


if __name__ == "__main__":
    main()
