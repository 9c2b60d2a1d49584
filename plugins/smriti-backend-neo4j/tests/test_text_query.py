"""The lexical channel's query: stopwords left out unless the text has nothing else."""

from __future__ import annotations

from collections.abc import Callable

from smriti_backend_neo4j.backend import Neo4jBackend
from smriti_backend_neo4j.records import lucene_query

from smriti.backend import Seek
from smriti.testing import GraphBuilder

DIMS = 8


def test_stopwords_are_left_out_of_the_query() -> None:
    assert lucene_query("What did Noah say about the ferry?") == '"Noah" OR "ferry?"'


def test_a_text_of_stopwords_only_keeps_them() -> None:
    assert lucene_query("the of") == '"the" OR "of"'


def test_query_syntax_stays_inert() -> None:
    assert lucene_query('ferry" OR x:* \\') == '"ferry\\"" OR "x:*"'


def test_seek_finds_content_words_and_stopword_only_memories(
    make_backend: Callable[..., Neo4jBackend],
) -> None:
    g = GraphBuilder(DIMS)
    backend = make_backend("alice")
    texts = ["the ferry leaves at noon", "the the of the", "a train to the coast"]
    for i, text in enumerate(texts):
        backend.add_memory(g.engram(i, content=text, summary=text, tags=[]), [], [])
    assert [h[0] for h in backend.seek(Seek(k=5, text="the ferry")).text] == ["e00000"]
    found = {h[0] for h in backend.seek(Seek(k=5, text="the of")).text}
    assert found == {"e00000", "e00001", "e00002"}
