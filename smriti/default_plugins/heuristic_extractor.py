"""The built-in heuristic cue extractor, used when no LLM is configured or it fails.

Cues are proper-noun phrases (entities) and the most salient content terms (keywords);
the summary is the first sentence; the memory type comes from simple textual signals.
"""

from __future__ import annotations

import re
from collections import Counter

from smriti import CueExtractor, CueRef, Extraction, Settings, hookimpl
from smriti.backend import STOPWORDS, stem, terms

MAX_CUES = 10
SUMMARY_CHARS = 240
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
_ENTITY_RE = re.compile(r"\b([A-Z][\w'’-]*(?:\s+(?:of|de|la|van|von|the)?\s*[A-Z][\w'’-]*)*)")
_PROCEDURAL = re.compile(
    r"\b(how to|steps?|first,|then|run |install|configure|use `|command|always|never|"
    r"make sure|in order to|workflow|procedure|recipe)\b",
    re.IGNORECASE,
)
_EPISODIC = re.compile(
    r"\b(yesterday|today|tonight|last (?:week|month|year|night)|this morning|ago|"
    r"on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"\d{4}-\d{2}-\d{2}|met|visited|went|happened|attended|i was|we were)\b",
    re.IGNORECASE,
)


def summarise(text: str) -> str:
    """The first sentence, shortened to about SUMMARY_CHARS characters."""
    flat = " ".join(text.split())
    first = _SENTENCE_RE.split(flat, maxsplit=1)[0]
    if len(first) <= SUMMARY_CHARS:
        return first
    cut = first[:SUMMARY_CHARS].rsplit(" ", 1)[0]
    return cut + "…"


def classify(text: str) -> str:
    """episodic, procedural or semantic from textual signals."""
    if _PROCEDURAL.search(text):
        return "procedural"
    if _EPISODIC.search(text):
        return "episodic"
    return "semantic"


def _sentence_initial(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?:\n\"'“"


def entities(text: str) -> list[str]:
    """Capitalised phrases, lower-cased, without stopwords at either end.

    A single capitalised word that opens a sentence is usually an ordinary word
    ("Apples are ..."), so it is left to the keyword pass.
    """
    found: list[str] = []
    for match in _ENTITY_RE.finditer(text):
        words = match.group(1).split()
        while words and words[0].lower() in STOPWORDS | {"i"}:
            words = words[1:]
        while words and words[-1].lower() in STOPWORDS | {"i"}:
            words = words[:-1]
        if not words or (len(words) == 1 and len(words[0]) < 2):
            continue
        if len(words) == 1 and _sentence_initial(text, match.start()):
            continue
        found.append(" ".join(words).lower())
    return found


def keywords(text: str, exclude: set[str]) -> list[str]:
    """Content terms ranked by frequency then length (longer terms are more specific)."""
    counts = Counter(t for t in terms(text) if len(t) > 2 and t not in exclude)
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))]


class HeuristicExtractor(CueExtractor):
    """Entities and keywords by rules: deterministic, offline, never fails."""

    name = "heuristic"
    priority = 0
    description = "built-in rule-based cue extractor (no LLM)"

    @classmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> HeuristicExtractor:
        return cls()

    def extract(self, text: str, *, query: bool = False) -> Extraction:
        cues: list[CueRef] = []
        seen: set[str] = set()
        for phrase in entities(text):
            if phrase not in seen:
                seen.update((phrase, stem(phrase)))
                cues.append(CueRef(phrase, "entity"))
        for word in keywords(text, seen):
            if len(cues) >= MAX_CUES:
                break
            if word not in seen:
                seen.add(word)
                cues.append(CueRef(word, "keyword"))
        return Extraction(summarise(text), classify(text), cues[:MAX_CUES])


@hookimpl
def register_cue_extractors() -> list[type[CueExtractor]]:
    return [HeuristicExtractor]
