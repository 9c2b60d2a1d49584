"""The lexical channel: a BM25 index over content, summary and tags, kept in SQLite.

Terms come from the lexical analyzer of the core's working set
(``smriti.backend.index_terms``: word tokens, stopwords dropped, lightly stemmed), so
this backend ranks text exactly as the working set does. The ``posting`` table holds
each engram's term frequencies and ``engram.terms`` its length. User text only ever becomes terms
bound as parameters, never query syntax. (SQLite's FTS5 was not used: its tokenizers
are not this analyzer, and some Python builds lack it.)
"""

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Sequence

from smriti.backend import index_terms as terms

#: Distinct query terms used; longer queries are cut (their first terms count).
MAX_QUERY_TERMS = 64
K1 = 1.2
B = 0.75


def document_terms(content: str, summary: str, tags: Sequence[str]) -> Counter[str]:
    """Term frequencies of one engram's searchable text."""
    return Counter(terms(f"{content}\n{summary}\n{' '.join(tags)}"))


def write_postings(conn: sqlite3.Connection, seq: int, counts: Counter[str]) -> None:
    """Index one engram (its old postings, if any, already removed)."""
    conn.executemany(
        "INSERT INTO posting (term, engram_seq, tf) VALUES (?, ?, ?)",
        [(term, seq, tf) for term, tf in counts.items()],
    )
    conn.execute("UPDATE engram SET terms = ? WHERE seq = ?", (sum(counts.values()), seq))


def search(
    conn: sqlite3.Connection, text: str, k: int, memory_type: str | None
) -> list[tuple[str, float]]:
    """Top-``k`` (engram id, BM25 score) for ``text``, best first (ties by id); [] when
    no term matches. Document frequencies count every engram; the type filter applies
    before the cut."""
    query = list(dict.fromkeys(terms(text)))[:MAX_QUERY_TERMS]
    if k <= 0 or not query:
        return []
    n, average = conn.execute("SELECT count(*), avg(terms) FROM engram").fetchone()
    if not n:
        return []
    marks = ", ".join("?" * len(query))
    rows = conn.execute(
        "SELECT p.term, p.tf, e.id, e.terms, e.memory_type FROM posting AS p "
        f"JOIN engram AS e ON e.seq = p.engram_seq WHERE p.term IN ({marks})",
        query,
    ).fetchall()
    df = Counter(term for term, *_ in rows)
    average = float(average) or 1.0
    scores: dict[str, float] = {}
    for term, tf, key, length, kind in rows:
        if memory_type is not None and kind != memory_type:
            continue
        idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        norm = tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
        scores[key] = scores.get(key, 0.0) + idf * norm
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
