"""Reducing user text to search terms, and the BM25 scan used without the FTS index.

User text never reaches Kùzu's FTS query parser as syntax: it is reduced to word
tokens (letters and digits, any script; the core analyzer's ``tokenize``) joined by
spaces. The scan without the index uses the core's analyzer itself
(``smriti.backend.index_terms``: stopwords dropped, light stemming), as the working
set and the reference backend do.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from smriti.backend import index_terms, tokenize

MAX_QUERY_TOKENS = 32


def query_tokens(query: str) -> list[str]:
    """Distinct tokens of a query, in order, at most MAX_QUERY_TOKENS (for the FTS index)."""
    return list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TOKENS]


def query_terms(query: str) -> list[str]:
    """Distinct index terms of a query, in order, at most MAX_QUERY_TOKENS."""
    return list(dict.fromkeys(index_terms(query)))[:MAX_QUERY_TOKENS]


def needle(term: str) -> str:
    """A substring of every word that ``term`` is the index term of: the light stemmer
    only cuts endings, except ``-ies`` -> ``-y`` (strawberries -> strawberry)."""
    return term[:-1] if len(term) > 3 and term.endswith("y") else term


def document_counts(content: str, summary: str, tags_text: str) -> Counter[str]:
    """Term frequencies of one engram's searchable text, as the core indexes it."""
    return Counter(index_terms(f"{content}\n{summary}\n{tags_text}"))


def bm25(
    query: Sequence[str], docs: dict[str, Counter[str]], k1: float = 1.2, b: float = 0.75
) -> list[tuple[str, float]]:
    """BM25 scores of ``docs`` (id -> term counts) for ``query`` terms, best first,
    zeros dropped.

    Document frequencies come from the candidate set itself: good enough for the
    native path, which answers only until the working set is loaded.
    """
    if not docs or not query:
        return []
    lengths = {key: sum(c.values()) for key, c in docs.items()}
    avg = sum(lengths.values()) / len(docs) or 1.0
    n = len(docs)
    scores: dict[str, float] = {}
    for term in query:
        holders = [(key, c[term]) for key, c in docs.items() if term in c]
        if not holders:
            continue
        df = len(holders)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for key, tf in holders:
            norm = tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[key] / avg))
            scores[key] = scores.get(key, 0.0) + idf * norm
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
