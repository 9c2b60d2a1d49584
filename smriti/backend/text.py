"""Smriti's text analyzer: folding, stopwords, light stemming and the terms built from them.

Two term streams come from it, and each must stay as it is, because data already stored
depends on it:

* ``index_terms`` (lexical search): word tokens (letters and digits of any script, lower
  case; underscores and apostrophes split words), stopwords dropped, ``stem``. The
  working set's BM25 index, the SQLite and Kùzu full-text terms and the server
  backends' queries use it; a stored full-text index holds these terms.
* ``terms`` (the lexical embedder and the heuristic cue extractor): NFKC-folded words
  that keep their apostrophes ("don't"), so contractions are stopwords, possessives
  lose their ``'s``, single characters are dropped. Stored lexical embeddings are
  hashed from these terms.

Both share ``STOPWORDS`` and ``stem``.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from smriti.model import Engram

#: The one tokeniser's unit: a run of letters and digits of any script, in text whose
#: underscores became spaces (``_runs``), so underscores, apostrophes and other
#: punctuation split runs. (``\w`` over the replaced text: ``[^\W_]`` matches the same
#: and is twice as slow in ``re``.)
_RUN = r"\w+"
#: Index tokens: the runs themselves.
TOKEN_RE = re.compile(_RUN, re.UNICODE)
#: Words for ``terms``: runs joined by an apostrophe stay one word ("don't").
WORD_RE = re.compile(rf"{_RUN}(?:['’]{_RUN})*", re.UNICODE)


def _runs(text: str) -> str:
    """``text`` with its underscores split off, ready for ``TOKEN_RE`` or ``WORD_RE``."""
    return text.replace("_", " ")


STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't down during each few for from further get gets got had hadn't has
    hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his
    how how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's like me
    more most much mustn't my myself no nor not now of off on once only or other ought our ours
    ourselves out over own really same shan't she she'd she'll she's should shouldn't so some
    such than that that's the their theirs them themselves then there there's these they
    they'd they'll they're they've this those through to too under until up upon us very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which
    while who who's whom why why's will with won't would wouldn't yes yet you you'd you'll
    you're you've your yours yourself yourselves one two also may might must shall thing things
    something anything everything remember know tell said says say want wants went go goes
    going make made use used using many lot lots well even still ever never always often
    sometimes""".split()  # noqa: SIM905
)


def fold(text: str) -> str:
    """NFKC-normalised lower-case text."""
    return unicodedata.normalize("NFKC", text).lower()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English singular form: strawberries -> strawberry, apples -> apple."""
    if len(word) <= 3 or not word.isascii():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "ous")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Word tokens of ``text`` in order (folded, apostrophes kept)."""
    return WORD_RE.findall(_runs(fold(text)))


def terms(text: str) -> list[str]:
    """Content terms: stemmed words that are not stopwords or single characters."""
    out = []
    for w in words(text):
        w = w.replace("’", "'")
        if w in STOPWORDS or (len(w) < 2 and w.isascii()):
            continue
        if w.endswith("'s"):
            w = w[:-2]
        out.append(stem(w))
    return out


def tokenize(text: str) -> list[str]:
    """Lower-cased runs of letters and digits of ``text`` (the index's tokens)."""
    return TOKEN_RE.findall(_runs(text.lower()))


#: token -> its index term ("" for a stopword); cleared when it grows past TERM_CACHE.
_TERM_OF: dict[str, str] = {}
TERM_CACHE = 200_000


def index_terms(text: str) -> list[str]:
    """Terms of the lexical index: word tokens, stopwords dropped, lightly stemmed."""
    table = _TERM_OF
    if len(table) > TERM_CACHE:
        table.clear()
    terms = []
    for token in tokenize(text):
        term = table.get(token)
        if term is None:
            term = table[token] = "" if token in STOPWORDS else stem(token)
        if term:
            terms.append(term)
    return terms


def document_terms(e: Engram) -> Counter[str]:
    """Term frequencies of an engram in the text index: content, summary and tags."""
    return text_terms(e.content, e.summary, e.tags)


def text_terms(content: str, summary: str, tags: Iterable[object]) -> Counter[str]:
    """Term frequencies of an engram's searchable text (``document_terms`` of its parts)."""
    return Counter(index_terms(f"{content} {summary} {' '.join(str(t) for t in tags)}"))
