"""Query-side relaxed matching: a query word also matches the other forms of its stem.

The lexical analyzer (``smriti.backend.text.stem``) folds plurals only, and it
also names stored cues and index terms, so changing it would split every existing store
into old and new terms. Questions and the statements that answer them inflect verbs
differently ("Where has Melanie camped?" against "we went camping"), so recall instead
appends to the query the regular inflections of each of its words: a form that no
memory uses costs nothing (it has no postings), and a memory using any form of the
word is found. Capitalised words (names) are left as they are.
"""

from __future__ import annotations

import re

from smriti.backend import STOPWORDS

_WORD = re.compile(r"[A-Za-z]+")
_VOWELS = frozenset("aeiou")
#: Words shorter than this are left alone (``uses`` -> ``us`` would match noise).
MIN_LENGTH = 4
#: Query words expanded, at most (a pasted paragraph is not a question).
MAX_WORDS = 12


def bases(word: str) -> set[str]:
    """Candidate stems of ``word``: without a regular ``-ing``/``-ed``/``-es``/``-s``
    ending (undoubling a final consonant, restoring a dropped ``e``, ``-ied`` and
    ``-ies`` to ``y``); ``word`` itself when it has none of these endings. Not ``-er``:
    it ends too many stems ("offer", "water") to be taken off."""
    out: set[str] = set()
    for suffix in ("ing", "ed", "es", "s"):
        if not word.endswith(suffix) or len(word) - len(suffix) < 3:
            continue
        root = word[: -len(suffix)]
        if suffix == "s" and root.endswith(("s", "u", "i")):
            continue  # "stress", "campus", "analysis" are not plurals
        out.add(root)
        if root[-1] == root[-2] and root[-1] not in "lsz":
            out.add(root[:-1])
        if suffix in ("ing", "ed") and root[-1] not in _VOWELS:
            out.add(root + "e")
    if word.endswith(("ied", "ies")):
        out.add(word[:-3] + "y")
    # A root ending in i or u is a torn ending ("marri", "activiti"), never a stem.
    return {b for b in out if b[-1] not in "iu"} or {word}


def forms(word: str) -> set[str]:
    """Regular inflections of ``word``'s candidate stems."""
    out: set[str] = set()
    for base in bases(word):
        if base.endswith("y") and base[-2] not in _VOWELS:
            out.update((base, base[:-1] + "ies", base[:-1] + "ied", base + "ing"))
            continue
        stem = base[:-1] if base.endswith("e") else base
        out.update((base, base + "s", stem + "ed", stem + "ing"))
        if _short_cvc(base):  # plan -> planned, but open -> opened: both are tried
            out.update((base + base[-1] + "ed", base + base[-1] + "ing"))
    return {f for f in out if len(f) >= 3}


def _short_cvc(base: str) -> bool:
    """A short stem ending consonant-vowel-consonant may double before -ed/-ing."""
    return (
        len(base) in (3, 4)
        and base[-1] not in _VOWELS | set("wxy")
        and base[-2] in _VOWELS
        and base[-3] not in _VOWELS
    )


def relaxed(text: str) -> str:
    """``text`` followed by the inflections of its words not already in it."""
    found = _WORD.findall(text)
    words = [w.lower() for i, w in enumerate(found) if i == 0 or not w[0].isupper()]
    words = [w for w in dict.fromkeys(words) if w not in STOPWORDS and len(w) >= MIN_LENGTH]
    have = {w.lower() for w in found}
    extra: dict[str, None] = {}
    for word in words[:MAX_WORDS]:
        extra.update(dict.fromkeys(sorted(forms(word) - have)))
    return f"{text} {' '.join(extra)}" if extra else text
