"""LoCoMo retrieval data, metrics, BM25 / dense / RRF baselines and an embedding cache.

Turn = memory (id = ``dia_id``; text ``"{speaker}: {text}"`` plus the image caption
when there is one; time = the session's date). Gold = a question's evidence ``dia_id``s
that exist in the conversation (a few answer-key entries are malformed, e.g.
``"D8:6; D9:17"``; they are split, and unknown ids are dropped).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import numpy as np

from smriti.backend import terms
from smriti.embedding import Embedder

DATA = Path("/work/shared/data/locomo/locomo_dev.json")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10)
CACHE = Path.home() / ".cache" / "smriti-bench"


@dataclass(slots=True)
class Turn:
    """One dialogue turn, stored as one memory."""

    dia_id: str
    text: str
    when: datetime


@dataclass(slots=True)
class Question:
    """A question with its gold turns."""

    text: str
    gold: set[str]
    category: int


@dataclass(slots=True)
class Conversation:
    """One LoCoMo sample."""

    id: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def session_time(raw: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict[str, str]) -> str:
    """``"{speaker}: {text}"`` plus ``[shares a photo of ...]`` when captioned."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo of {turn['blip_caption']}]"
    return text


def load(path: Path = DATA) -> list[Conversation]:
    """Conversations with their turns and category 1-4 questions that have gold turns."""
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = Conversation(sample["sample_id"])
        c = sample["conversation"]
        n = 1
        while f"session_{n}" in c:
            when = session_time(c[f"session_{n}_date_time"])
            for i, turn in enumerate(c[f"session_{n}"]):
                conv.turns.append(
                    Turn(turn["dia_id"], turn_text(turn), when + timedelta(seconds=i))
                )
            n += 1
        ids = {t.dia_id for t in conv.turns}
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            gold = {g for e in qa.get("evidence", []) for g in re.split(r"[;\s]+", e) if g in ids}
            if gold:
                conv.questions.append(Question(qa["question"], gold, int(qa["category"])))
        out.append(conv)
    return out


# -- metrics ---------------------------------------------------------------------------
def session_of(dia_id: str) -> str:
    """The session a turn belongs to: ``D3`` for ``D3:5``."""
    return dia_id.split(":", 1)[0]


def scores(ranking: Sequence[str], gold: set[str]) -> dict[str, float]:
    """One ranking's turn-level recall@1/5/10, MRR@10 and nDCG@10 (binary relevance),
    and the session-level figures peers publish: ``sR@k``, the share of the gold turns'
    sessions that some turn in the top k belongs to, and ``Hit@10``, whether any gold
    turn is in the top 10."""
    top = list(ranking[:10])
    out = {f"R@{k}": len(gold & set(top[:k])) / len(gold) for k in KS}
    first = next((i for i, d in enumerate(top) if d in gold), None)
    out["MRR"] = 0.0 if first is None else 1.0 / (first + 1)
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(top) if d in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    out["nDCG@10"] = dcg / ideal
    sessions = {session_of(d) for d in gold}
    for k in (5, 10):
        found = {session_of(d) for d in top[:k]}
        out[f"sR@{k}"] = len(sessions & found) / len(sessions)
    out["Hit@10"] = 0.0 if first is None else 1.0
    return out


METRICS = ("R@1", "R@5", "R@10", "MRR", "nDCG@10", "sR@5", "sR@10", "Hit@10")


class Tally:
    """Mean metrics per category and overall."""

    def __init__(self) -> None:
        self.sums: dict[str, Counter[str]] = {}
        self.counts: Counter[str] = Counter()

    def add(self, category: int, result: dict[str, float]) -> None:
        """Record one question's scores."""
        for group in (CATEGORIES[category], "overall"):
            self.sums.setdefault(group, Counter()).update(result)
            self.counts[group] += 1

    def means(self) -> dict[str, dict[str, float]]:
        """{group: {metric: mean}} plus ``n``."""
        return {
            g: {**{m: round(s[m] / self.counts[g], 4) for m in METRICS}, "n": self.counts[g]}
            for g, s in self.sums.items()
        }


# -- baselines -------------------------------------------------------------------------
class BM25:
    """Okapi BM25 (k1 = 1.2, b = 0.75) over stemmed content terms."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], k1: float = 1.2, b: float = 0.75):
        self.ids = list(ids)
        self.k1, self.b = k1, b
        self.docs = [Counter(terms(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 1.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[int]] = {}
        for i, d in enumerate(self.docs):
            for t in d:
                self.postings.setdefault(t, []).append(i)

    def rank(self, query: str, k: int = 100) -> list[str]:
        """Ids of the best ``k`` documents for ``query``."""
        acc = np.zeros(len(self.docs))
        for t in set(terms(query)):
            for i in self.postings.get(t, ()):
                tf = self.docs[i][t]
                norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                acc[i] += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
        order = np.argsort(-acc, kind="stable")[:k]
        return [self.ids[i] for i in order if acc[i] > 0]


def dense_rank(
    ids: Sequence[str], matrix: np.ndarray, query: np.ndarray, k: int = 100
) -> list[str]:
    """Ids by cosine similarity (rows and query are unit vectors)."""
    sims = matrix @ query
    return [ids[i] for i in np.argsort(-sims, kind="stable")[:k]]


def rrf(*rankings: Sequence[str], k: int = 60) -> list[str]:
    """Reciprocal-rank fusion: sum of 1 / (k + rank)."""
    fused: Counter[str] = Counter()
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            fused[doc] += 1.0 / (k + rank + 1)
    return [d for d, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))]


# -- embedding cache -------------------------------------------------------------------
class CachingEmbedder(Embedder):
    """Wraps an embedder; each distinct text is embedded once (and kept on disk).

    Used so that baselines, Smriti and the peer system see identical vectors and the
    expensive model runs once per text across runs.
    """

    name: ClassVar[str] = "bench-cache"

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.vectors: dict[str, np.ndarray] = {}
        digest = hashlib.sha256(inner.model_id.encode()).hexdigest()[:16]
        self.path = CACHE / f"embeddings-{digest}.npz"
        self._load()

    @classmethod
    def from_settings(cls, settings: object, *, explicit: bool = False) -> None:
        return None

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dims(self) -> int | None:
        return self.inner.dims

    @property
    def similarity_baseline(self) -> float:
        return self.inner.similarity_baseline

    def prime(self, texts: Sequence[str]) -> None:
        """Embed every unseen text in batches, then save the cache."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if not missing:
            return
        for i in range(0, len(missing), 512):
            chunk = missing[i : i + 512]
            for text, vec in zip(chunk, self.inner.embed(chunk), strict=True):
                self.vectors[text] = vec
        self.save()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            for text, vec in zip(missing, self.inner.embed(missing), strict=True):
                self.vectors[text] = vec
        if not texts:
            return np.zeros((0, self.dims or 0), dtype=np.float32)
        return np.vstack([self.vectors[t] for t in texts]).astype(np.float32, copy=False)

    def save(self) -> None:
        """Write the cache (texts as JSON, vectors as one matrix)."""
        if not self.vectors:
            return
        CACHE.mkdir(parents=True, exist_ok=True)
        texts = list(self.vectors)
        matrix = np.vstack([self.vectors[t] for t in texts])
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, texts=np.array(json.dumps(texts)), matrix=matrix)
        tmp.replace(self.path)

    def _load(self) -> None:
        if not self.path.is_file():
            return
        with np.load(self.path) as data:
            texts = json.loads(str(data["texts"]))
            self.vectors = dict(zip(texts, data["matrix"], strict=True))
