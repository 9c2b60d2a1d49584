"""Offline rescoring of recall's scored pools on LoCoMo: a reranking idea tried in seconds.

``--dump`` runs recall on every question as ``quality.py`` does (same stores, limit 10)
and keeps, per question, every candidate recall scored (the pool of about 80) with its
evidence: the exact cosine, the lexical and cue scores, whether the vector channel
returned it, its hop and match type, whether it starts with a subject the query names,
says when or is itself a question, its fused similarity after every bonus, its
composite score, its source turn and its time. Ranking each pool by the engine's own
score reproduces the engine's top 10; the script checks this and prints the count.

A rule rescores a candidate from that evidence; each rule is reported with the metrics
of ``quality.py`` (turn-level and session-level). A rule can only reorder the pool: it
says nothing about memories recall never scored. Rules that change the fused similarity
add ``WEIGHT_SIMILARITY`` (0.4) times the change to the composite score, which is exact
for direct hits below the cap of 1.

Usage::

    uv run python bench/pools.py --conversations conv-26,conv-41,conv-43 \\
        --dump /tmp/pools.json                 # recall once, keep the pools, rescore
    uv run python bench/pools.py --pools /tmp/pools.json   # rescore a kept dump
    uv run python bench/pools.py --pools /tmp/hold.json --fit /tmp/tune.json

``--fit DUMP`` adds the rule "learned": a logistic regression of whether a candidate is
a gold turn on all of its evidence and the engine's own score, fitted on another dump's
pools (balanced classes, L2). It asks how much better the evidence recall already has
could be weighed: fitted on one half and applied to the other, it is the headroom a
re-weighting of that evidence would find on conversations it was not tuned on.

Results: tables on stdout, JSON in bench/results/pools-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402
import quality  # noqa: E402
from common import configure_logging, machine, plugin_manager, table, write_results  # noqa: E402

#: WEIGHT_SIMILARITY's default: how much of a change in fused similarity reaches the score.
SIMILARITY_WEIGHT = 0.4
#: Questions asking what would, might or could be (LoCoMo's open-domain inferences).
SPECULATIVE = re.compile(r"\b(would|likely|might|could|probably)\b", re.IGNORECASE)
Rule = Callable[[dict[str, Any], dict[str, Any]], float]


@contextmanager
def capturing(sink: dict[str, Any]) -> Iterator[None]:
    """Recall with its pool's evidence and composite scores recorded into ``sink``."""
    from smriti.engine import fusion, recall
    from smriti.engine.query import says_when

    rescore, composite, rank = fusion.Fusion.rescore, recall.composite, recall.rank

    def recording_rescore(self: Any, found: Any, pool: Any) -> None:
        cosines = self.cosines(list(pool), pool)
        evidence = {
            i: {
                "id": i,
                "cos": cosines[i],
                "lex": self.lexical.get(i, 0.0),
                "cue": self.cue.get(i, 0.0),
                "in_vector": i in self.vector,
                "hop": found[i].hop,
                "match": found[i].match_type,
                "leads": fusion.leads(pool[i].content, self.subjects),
                "says_when": says_when(pool[i].content),
                "asks": fusion.asks(pool[i].content),
                "source": pool[i].source,
                "time": pool[i].created_at.timestamp(),
            }
            for i in pool
        }
        rescore(self, found, pool)
        for i in list(evidence):
            if i in pool:
                evidence[i]["sim"] = found[i].similarity
            else:
                del evidence[i]
        sink["pool"], sink["scores"] = evidence, {}

    def recording_composite(engram: Any, *args: Any) -> float:
        value = composite(engram, *args)
        sink["scores"][engram.id] = value
        return value

    def recording_rank(*args: Any) -> Any:
        sink["contested"] = sorted(args[3]) if len(args) > 3 else []
        return rank(*args)

    fusion.Fusion.rescore, recall.composite = recording_rescore, recording_composite
    recall.rank = recording_rank
    try:
        yield
    finally:
        fusion.Fusion.rescore, recall.composite, recall.rank = rescore, composite, rank


def dump(conversations: list[locomo.Conversation]) -> list[dict[str, Any]]:
    """Every question's pool (see the module docstring), conversation by conversation."""
    embedder = quality.make_embedder("local", None)
    texts = [t.text for c in conversations for t in c.turns]
    quality.prime(embedder, texts + [q.text for c in conversations for q in c.questions])
    pm, sink, rows = plugin_manager(), {}, []
    with tempfile.TemporaryDirectory(prefix="smriti-pools-") as root, capturing(sink):
        for conv in conversations:
            engine = quality.open_engine(conv.id.replace("conv-", "conv"), root, embedder, pm)
            try:
                quality.load_memories(engine, [(t.dia_id, t.text, t.when) for t in conv.turns])
                engine.consolidate()
                restorer = quality.Restorer(engine)
                for q in conv.questions:
                    top = [r.engram.source for r in restorer.recall(q.text, 10)]
                    pool = sink["pool"]
                    for i, evidence in pool.items():
                        evidence["score"] = sink["scores"].get(i, 0.0)
                    rows.append(
                        {
                            "question": q.text,
                            "category": q.category,
                            "gold": sorted(q.gold),
                            "top10": top,
                            "contested": sink["contested"],
                            "pool": list(pool.values()),
                        }
                    )
            finally:
                engine.close()
    embedder.save()
    return rows


def ranked(row: dict[str, Any], rule: Rule) -> list[str]:
    """The pool's sources, best first under ``rule`` (ties broken as recall breaks them:
    by hop, then memory id), the newer of two memories in conflict just above the older
    one as recall puts it (``recall.rank``)."""
    from smriti.engine.recall import PROMOTION

    scores = {c["id"]: rule(c, row) for c in row["pool"]}
    for newer, older in sorted(row["contested"], key=lambda p: -scores.get(p[1], 0.0)):
        if newer in scores and older in scores and scores[older] >= scores[newer]:
            scores[newer] = scores[older] + PROMOTION
    pool = sorted(row["pool"], key=lambda c: (-scores[c["id"]], c["hop"], c["id"]))
    return [c["source"] for c in pool]


def _direct(candidate: dict[str, Any]) -> bool:
    return candidate["hop"] == 0 or candidate["match"] == "context"


def _fused(candidate: dict[str, Any], cosine: float | None = None) -> float:
    """The weighted mean of ``smriti.engine.fusion`` (its weights when measured)."""
    from smriti.engine import fusion

    value = max(0.0, candidate["cos"] if cosine is None else cosine)
    total = fusion.VECTOR_WEIGHT + fusion.LEXICAL_WEIGHT + fusion.CUE_WEIGHT
    return (
        fusion.VECTOR_WEIGHT * value
        + fusion.LEXICAL_WEIGHT * candidate["lex"]
        + fusion.CUE_WEIGHT * candidate["cue"]
    ) / total


def speculative(change: Callable[[dict[str, Any]], float]) -> Rule:
    """For speculative questions only, the fused similarity of direct hits changed by
    ``change(candidate)``."""

    def rule(c: dict[str, Any], row: dict[str, Any]) -> float:
        if not _direct(c) or not SPECULATIVE.search(row["question"]):
            return c["score"]
        return c["score"] + SIMILARITY_WEIGHT * change(c)

    return rule


def relative_cosine(min_max: bool) -> Rule:
    """Direct hits' cosines scaled to the pool's best (or its min-max range), as the
    lexical scores are to the best lexical hit."""

    def rule(c: dict[str, Any], row: dict[str, Any]) -> float:
        if not _direct(c):
            return c["score"]
        cosines = [max(0.0, d["cos"]) for d in row["pool"] if _direct(d)]
        top, low = max(cosines), min(cosines) if min_max else 0.0
        scaled = (max(0.0, c["cos"]) - low) / (top - low) if top > low else 0.0
        return c["score"] + SIMILARITY_WEIGHT * (_fused(c, scaled) - _fused(c))

    return rule


def rules() -> dict[str, Rule]:
    """The rules reported, by name (bench/README.md cites them)."""
    from smriti.engine import fusion

    total = fusion.VECTOR_WEIGHT + fusion.LEXICAL_WEIGHT + fusion.CUE_WEIGHT
    share = fusion.LEXICAL_WEIGHT / total
    return {
        "engine": lambda c, row: c["score"],
        "speculative: no lexical": speculative(lambda c: -share * c["lex"]),
        "speculative: subject x2": speculative(lambda c: fusion.SUBJECT_BONUS * c["leads"]),
        "speculative: vector x2": speculative(lambda c: _fused(c) - _fused({**c, "cos": 0.0})),
        "cosine / best": relative_cosine(False),
        "cosine min-max": relative_cosine(True),
    }


#: The evidence a learned rule weighs (``--fit``), in this order.
FEATURES = ("cos", "lex", "cue", "leads", "says_when", "asks", "in_vector", "sim", "score")


def _features(c: dict[str, Any]) -> list[float]:
    hopped = c["hop"] > 0 and c["match"] != "context"
    return [float(c[k]) for k in FEATURES] + [float(hopped), float(c["match"] == "context")]


def learned(train: list[dict[str, Any]], l2: float = 1e-3, steps: int = 3000) -> Rule:
    """A logistic regression of "is a gold turn" on each candidate's evidence, fitted on
    ``train``'s pools by gradient descent (features standardised, classes balanced)."""
    import numpy as np

    x = np.array([_features(c) for r in train for c in r["pool"]], dtype=np.float64)
    y = np.array([c["source"] in set(r["gold"]) for r in train for c in r["pool"]], float)
    mean, spread = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mean) / spread
    share = y.mean()
    balance = np.where(y == 1.0, 0.5 / share, 0.5 / (1.0 - share))
    w, b = np.zeros(z.shape[1]), 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        grad = (p - y) * balance
        w -= 0.5 * (z.T @ grad / len(y) + l2 * w)
        b -= 0.5 * float(grad.mean())

    def rule(c: dict[str, Any], row: dict[str, Any]) -> float:
        return float(((np.array(_features(c)) - mean) / spread) @ w)

    return rule


def report(rows: list[dict[str, Any]], extra: dict[str, Rule] | None = None) -> dict[str, Any]:
    """Metrics of every rule, printed per category; the pool coverage of the gold."""
    reproduced = sum(ranked(r, rules()["engine"])[:10] == r["top10"] for r in rows)
    print(f"engine order reproduces recall's top 10 for {reproduced} of {len(rows)} questions")
    inside: dict[str, list[int]] = {}
    for r in rows:
        sources = {c["source"] for c in r["pool"]}
        counts = inside.setdefault(locomo.CATEGORIES[r["category"]], [0, 0])
        counts[0] += len(sources & set(r["gold"]))
        counts[1] += len(r["gold"])
    print("gold turns in the scored pool:", {k: f"{a} of {b}" for k, (a, b) in inside.items()})
    results = {}
    for name, rule in {**rules(), **(extra or {})}.items():
        tally = locomo.Tally()
        for r in rows:
            tally.add(r["category"], locomo.scores(ranked(r, rule), set(r["gold"])))
        results[name] = tally.means()
    for group in [*locomo.CATEGORIES.values(), "overall"]:
        lines = [[n, *(m[group][k] for k in locomo.METRICS)] for n, m in results.items()]
        print(f"\n{group}\n{table(['rule', *locomo.METRICS], lines)}")
    return {"reproduced": reproduced, "questions": len(rows), "gold_in_pool": inside, **results}


def main() -> None:
    """Dump pools (``--dump``) or read them (``--pools``), then rescore."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--conversations", default="", help="comma-separated sample ids")
    p.add_argument("--dump", type=Path, help="recall, write the pools here, then rescore")
    p.add_argument("--pools", type=Path, help="rescore the pools written by --dump")
    p.add_argument("--fit", type=Path, help="also rank by a rule learned on this dump")
    p.add_argument("--out", type=Path, default=None, help="figures JSON (default bench/results)")
    args = p.parse_args()
    if (args.dump is None) == (args.pools is None):
        raise SystemExit("give either --dump PATH (recall and keep the pools) or --pools PATH")
    configure_logging("warning")
    if args.dump is not None:
        conversations = locomo.load(locomo.DATA)
        if args.conversations:
            wanted = set(args.conversations.split(","))
            conversations = [c for c in conversations if c.id in wanted]
        rows = dump(conversations)
        args.dump.write_text(json.dumps(rows) + "\n", encoding="utf-8")
    else:
        rows = json.loads(args.pools.read_text(encoding="utf-8"))
    extra = {}
    if args.fit is not None:
        extra["learned"] = learned(json.loads(args.fit.read_text(encoding="utf-8")))
    figures = report(rows, extra)
    payload = {"machine": machine(), "args": vars(args), "rules": figures}
    print(f"results: {write_results('pools', payload, args.out)}")


if __name__ == "__main__":
    main()
