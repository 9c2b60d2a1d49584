"""Query analysis without a language model: whom a question is about, and whether it
asks when something happened.

Recall favours the memories whose subject the query names (``fusion.SUBJECT_BONUS``:
"Melanie: ..." for a question about Melanie). The cue extractor's entity names miss
two common shapes of such questions: the possessive ("What are Joanna's hobbies?"
gives the entity "joanna's", which no memory starts with) and a name the extractor
takes for an ordinary word ("Would Caroline likely ...", "When Jon has lost his job").
``subjects`` adds both: every entity name without its possessive, and every
capitalised word of the question that does not start a sentence (a sentence's first
word is capitalised whatever it is), without its possessive.

A question asking when ("When did ...", "What year ...", "How long ago ...") is
answered by a memory that says when: "yesterday", "last Friday", "two weeks ago",
"in May 2022". On LoCoMo 74-87 % of the turns answering such questions say when,
against 14-22 % of all turns, so recall raises the memories that say when for these
questions (``fusion.TIME_BONUS``; ``asks_when``, ``says_when``; English only, as the
cue extractor and ``smriti.engine.inflection`` are).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from smriti.model import normalise_cue_name

#: A question about a time: "when", or "what/which year|month|day|date|time", "how long ago".
_ASKS_WHEN = re.compile(
    r"^\W*when\b|\b(?:what|which)\s+(?:year|month|day|date|week|weekend|time)\b"
    r"|\bhow\s+long\s+ago\b",
    re.IGNORECASE,
)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
#: A memory saying when: a relative time, a weekday, a month or a year.
_SAYS_WHEN = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|last|next|ago|recently|lately|just|earlier"
    rf"|weekend|week|month|year|{_DAYS}|{_MONTHS}|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)

#: A word of the question: a letter, then letters, digits, apostrophes and hyphens.
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_POSSESSIVE = re.compile(r"['’]s$")
#: What ends a sentence (the next word is capitalised whatever it is).
_SENTENCE_END = '.!?:;"“”'
#: How long a name may be and still be a subject (longer spans are not names).
MAX_NAME = 60


def strip_possessive(name: str) -> str:
    """``name`` without a trailing "'s" (or "’s")."""
    return _POSSESSIVE.sub("", name)


def subjects(text: str, entities: Iterable[str]) -> tuple[str, ...]:
    """The normalised names a question is about: ``entities`` (normalised entity cue
    names) without possessives, then capitalised words of ``text`` not starting a
    sentence."""
    out: dict[str, None] = {}
    for name in entities:
        if clean := normalise_cue_name(strip_possessive(name)):
            out.setdefault(clean, None)
    for match in _WORD.finditer(text):
        word, before = match.group(0), text[: match.start()].rstrip()
        # Every sentence's first word is capitalised, name or not.
        if word[:1].isupper() and before and before[-1] not in _SENTENCE_END:
            clean = normalise_cue_name(strip_possessive(word.rstrip("'’-")))
            if 1 < len(clean) <= MAX_NAME:
                out.setdefault(clean, None)
    return tuple(out)


def asks_when(text: str) -> bool:
    """Whether the question ``text`` asks when something happened."""
    return _ASKS_WHEN.search(text) is not None


def says_when(content: str) -> bool:
    """Whether ``content`` says when: a relative time, a weekday, a month or a year."""
    return _SAYS_WHEN.search(content) is not None
