"""Repeats, near-duplicates and conflicts of a memory being stored, found without an LLM.

All three come from the store's own nearest-neighbour search (the one that makes its
associations), so they cost no extra vector search:

- a **repeat** is the same text after normalising Unicode (NFKC), case, whitespace and
  punctuation (``normalised_text``). Only a repeat is merged: the store writes nothing
  and strengthens the existing memory instead, so a client that sends the same store
  twice stores it once. Anything else is stored, because a false merge loses what the
  user said ("we chose option A" / "... option B", "take vitamin D" / "... vitamin C"),
  while a missed one costs a little space.
- a **near-duplicate** is a neighbour at or above ``DEDUP_THRESHOLD`` cosine that is not
  a repeat. The new memory is stored, linked to it by a ``near_duplicate`` association
  and the pair is reported to the caller, who can correct or forget one of them; the
  tidy-up (``smriti.engine.tidy``) lists such groups and merges them on request.
- a **possible conflict** is a neighbour at or above ``CONFLICT_THRESHOLD`` that shares
  a specific cue (one few memories have) with the new memory but names other things
  (names, numbers, negations): the same subject with other specifics, as in "the
  deadline is March 5" and "... March 12". Text that announces a change ("now", "no
  longer", "moved to") lowers the bar by ``CHANGE_BONUS``: "I now live in Berlin, I left
  Paris" is further from "I live in Paris" than its meaning suggests. Conflicts are
  reported to the caller. Those of a memory that announces a change are also stored as
  ``conflicts`` associations, and recall then ranks the newer memory first; look-alike
  statements without such words are only reported (in a chat log, replies resemble each
  other without contradicting anything).

Superseded memories are none of these: they already have a newer version.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from smriti.backend import Expand
from smriti.model import Engram

if TYPE_CHECKING:
    from smriti.engine.core import Engine

#: How much lower the conflict threshold is for text that announces a change.
CHANGE_BONUS = 0.2
#: Neighbours looked at for repeats, near-duplicates and conflicts.
NEIGHBOURS = 10
CONFLICTS_REPORTED = 5
NEAR_DUPLICATES_REPORTED = 5
#: A repeat differs only in case, spacing or punctuation: its cosine is far above this,
#: whatever the embedder, so the neighbour search always reaches it.
REPEAT_FLOOR = 0.5
#: The relation type of the association from a memory to the near-duplicates it was
#: stored beside.
NEAR_DUPLICATE = "near_duplicate"
#: A cue shared by a conflicting pair encodes at most 1/SPECIFIC_SHARE of the memories
#: (or SPECIFIC_MIN, in a small store).
SPECIFIC_SHARE = 100
SPECIFIC_MIN = 5

_CHANGE = re.compile(
    r"\b(now|no longer|anymore|any more|moved|changed|switched|instead|replaced|updated|"
    r"correction|no more|stopped)\b",
    re.IGNORECASE,
)
_NAMES = re.compile(r"\b(?:[A-Z][\w'-]*|\w*\d[\w.:/-]*)")
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|without|\w+n't)\b", re.IGNORECASE)
#: Hyphens and dashes that make a minus sign when they stand right before a number.
_MINUS = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2212")


def _is_punctuation(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


#: The ASCII punctuation characters (Unicode category P): the only ones an ASCII text's
#: repeat key can change.
_ASCII_PUNCTUATION = re.compile(
    "[{}]".format(re.escape("".join(filter(_is_punctuation, map(chr, range(128))))))
)


def normalised_text(text: str) -> str:
    """The repeat key: NFKC, case-folded, punctuation read as a word break, whitespace
    collapsed, invisible format characters dropped.

    Punctuation that carries a number's meaning is kept: between two digits ("3.5",
    "1,000", "10:30", "2024-05-01"), and a minus sign before a number that does not
    follow a word ("-5"). So "We chose option A." repeats "we chose  option a", while
    "3.5" and "35", or "-5" and "5", stay different facts.
    """
    if text.isascii():
        # Every store keys its nearest neighbours' texts: in ASCII (NFKC and case-folding
        # are lower(), no format characters) only the punctuation needs a look.
        folded = text.lower()
        return " ".join(_ASCII_PUNCTUATION.sub(lambda m: _kept(folded, m.start()), folded).split())
    return _normalised_unicode(text)


def _kept(folded: str, i: int) -> str:
    """The punctuation character at ``folded[i]`` if it carries a number's meaning, else
    a space."""
    ch = folded[i]
    before = folded[i - 1] if i > 0 else " "
    after = folded[i + 1] if i < len(folded) - 1 else " "
    numeric = before.isdigit() and after.isdigit()
    minus = ch in _MINUS and after.isdigit() and not before.isalnum()
    return ch if numeric or minus else " "


def _normalised_unicode(text: str) -> str:
    """``normalised_text`` for any text, a character at a time."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for i, ch in enumerate(folded):
        kind = unicodedata.category(ch)
        if kind == "Cf":
            continue
        if kind.startswith("P") or ch in _MINUS:
            out.append(_kept(folded, i))
        else:
            out.append(ch)
    return " ".join("".join(out).split())


def names_and_numbers(text: str) -> tuple[str, ...]:
    """The specifics a statement names, in order: capitalised words (not sentence-
    initial), tokens with digits and negations, case-folded. Two close statements that
    name different specifics may contradict each other (``examine``)."""
    found: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n+", text.strip()):
        for i, match in enumerate(_NAMES.finditer(sentence)):
            token = match.group(0).rstrip(".:/-")
            digits = any(ch.isdigit() for ch in token)
            pronoun = token.startswith(("I'", "I\u2019"))  # I'm, I've: not names
            if digits or (len(token) > 1 and not pronoun and (i > 0 or match.start() > 0)):
                found.append(token.casefold())
        found += [m.group(0).casefold() for m in _NEGATION.finditer(sentence)]
    return tuple(found)


def announces_change(text: str) -> bool:
    """True when the text says something changed ("now", "no longer", "moved" ...)."""
    return bool(_CHANGE.search(text))


@dataclass(slots=True)
class Neighbours:
    """What the store learned about a new memory's nearest existing memories."""

    #: (engram id, cosine) above the lowest threshold in play, best first.
    hits: list[tuple[str, float]]
    #: The engrams of ``hits`` by id, as read with them (superseded ones included).
    engrams: dict[str, Engram]
    #: An existing memory the new text repeats: nothing new is stored.
    duplicate: Engram | None = None
    #: (engram, cosine) of possible conflicts, best first.
    conflicts: list[tuple[Engram, float]] | None = None
    #: (engram, cosine) of current memories at or above ``DEDUP_THRESHOLD``, best first.
    near_duplicates: list[tuple[Engram, float]] | None = None


def floor(engine: Engine) -> float:
    """The lowest cosine any of the checks (or the associations) needs."""
    s = engine.settings
    bars = [s.association_threshold, s.conflict_threshold - CHANGE_BONUS]
    if s.dedup_threshold is not None:
        bars += [min(s.dedup_threshold, 0.999), REPEAT_FLOOR]
    return max(-1.0, min(bars))


def examine(
    engine: Engine,
    text: str,
    hits: list[tuple[str, float]],
    loaded: dict[str, Engram],
    cue_names: list[str],
) -> Neighbours:
    """Find the memory ``text`` repeats among ``hits`` (their engrams in ``loaded``),
    else its near-duplicates and possible conflicts.

    With ``DEDUP_THRESHOLD=off`` nothing is a repeat or a near-duplicate: every store
    writes a new memory.
    """
    s = engine.settings
    found = Neighbours(hits, loaded)
    current = [(loaded[i], sim) for i, sim in hits if i in loaded and not loaded[i].is_superseded]
    if not current:
        return found
    if s.dedup_threshold is not None:
        key = normalised_text(text)
        for e, _ in current:
            if normalised_text(e.content) == key:
                found.duplicate = e
                return found
        near = [(e, sim) for e, sim in current if sim >= s.dedup_threshold]
        found.near_duplicates = near[:NEAR_DUPLICATES_REPORTED]
    bar = s.conflict_threshold - (CHANGE_BONUS if announces_change(text) else 0.0)
    # Other specifics: a name, number or negation one has and the other lacks (the same
    # ones in another order is the same subject, as in a reply that names the speaker).
    names = set(names_and_numbers(text))
    close = [
        (e, sim) for e, sim in current if sim >= bar and set(names_and_numbers(e.content)) != names
    ]
    found.conflicts = _sharing_cues(engine, close, cue_names)[:CONFLICTS_REPORTED]
    return found


def _sharing_cues(
    engine: Engine, close: list[tuple[Engram, float]], cue_names: list[str]
) -> list[tuple[Engram, float]]:
    """The ``close`` engrams that are encoded by at least one of ``cue_names``."""
    if not close or not cue_names:
        return []
    known = {c.id for c in engine.backend.get_cues(cue_names)}
    if not known:
        return []
    around = engine.backend.neighbourhood(Expand([e.id for e, _ in close], 0, 0, 0))
    # A specific cue: one a few memories have. Every memory of a chat names its
    # speakers, and sharing those says nothing about the subject.
    rare = max(SPECIFIC_MIN, engine.backend.count_engrams() // SPECIFIC_SHARE)
    sharing = {
        link.engram_id
        for link in around.links
        if link.cue_id in known and around.degrees.get(link.cue_id, 0) <= rare
    }
    return [(e, sim) for e, sim in close if e.id in sharing]
