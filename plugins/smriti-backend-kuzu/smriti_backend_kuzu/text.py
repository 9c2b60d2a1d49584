"""Tokenising user text for full-text search, and the BM25 scan used below the index.

User text never reaches Kùzu's FTS query parser as syntax: it is reduced to word
tokens (letters and digits, any script; the core analyzer's ``tokenize``) joined by
spaces.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from smriti.index.text import tokenize

MAX_QUERY_TOKENS = 32


def query_tokens(query: str) -> list[str]:
    """Distinct tokens of a query, in order, at most MAX_QUERY_TOKENS."""
    return list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TOKENS]


def bm25(
    query: Sequence[str], docs: dict[str, str], k1: float = 1.2, b: float = 0.75
) -> list[tuple[str, float]]:
    """BM25 scores of ``docs`` (id -> text) for ``query`` tokens, best first, zeros dropped.

    Document frequencies come from the candidate set itself: good enough for the small
    stores that are searched without the FTS index.
    """
    if not docs or not query:
        return []
    tokenised = {key: Counter(tokenize(text)) for key, text in docs.items()}
    avg = sum(sum(c.values()) for c in tokenised.values()) / len(tokenised) or 1.0
    n = len(tokenised)
    scores: dict[str, float] = {}
    for term in query:
        df = sum(1 for c in tokenised.values() if term in c)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for key, counts in tokenised.items():
            tf = counts.get(term, 0)
            if tf:
                length = sum(counts.values())
                norm = tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
                scores[key] = scores.get(key, 0.0) + idf * norm
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
