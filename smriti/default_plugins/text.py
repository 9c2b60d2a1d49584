"""Tokenising shared by the built-in lexical embedder and heuristic extractor."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

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
    return WORD_RE.findall(fold(text))


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
