"""How recall weighs its channels for one memory, and what its neighbours in time add.

A direct hit's similarity is a weighted mean of three pieces of evidence: the query's
cosine similarity to the memory, its lexical score (relative to the best lexical hit)
and its cue score (``recall.cue_hits``). Agreement between channels counts: a memory
both worded like the query and close to it in meaning beats one that is only either.
The cosine is exact for every memory in the loaded pool (read from its embedding when
the vector channel did not return it); before the pool is loaded, a hit outside the
vector channel's top k is given the lowest cosine that channel returned, which it
cannot exceed. Cosines count on the engine's common scale (``Engine.scale``), so the
weights suit every embedding model.

A memory whose subject the query names gains ``SUBJECT_BONUS``: its text starts with
an entity the query names ("Melanie: ..." for a question about Melanie, "Alice prefers
..." for one about Alice). A name anywhere else in a memory says less: a conversation
mentions its people everywhere.

Then contiguity (``smriti.engine.contiguity``): a memory and the ones stored just before
and after it share context, so each gains ``CONTEXT_SHARE`` of its strongest
neighbour's similarity. A neighbour reached only this way is a ``context`` result,
scored like a direct hit on its own similarity plus that share.

A query that names a date ("on 1 May, 2022", "in January 2022") raises by
``DATE_BONUS`` the memories made at that time (``created_at``, which is ``occurred_at``
for events stored after the fact; ``smriti.engine.when``).

A memory that is itself a question ("What pet do you have?") records that something was
asked, not what is known: it shares the query's words and shape, so it outranks the
statement that answers it. Its similarity is scaled by ``QUESTION_FACTOR`` after the
contiguity shares are given, so the answer stored after it still gains the full share
of the question's match.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from smriti.backend import unit
from smriti.embedding import SimilarityScale
from smriti.engine.query import says_when
from smriti.engine.when import Window
from smriti.model import Engram, normalise_cue_name

if TYPE_CHECKING:
    from smriti.engine.recall import Candidate

#: Weights of the cosine, lexical and cue evidence of a direct hit.
VECTOR_WEIGHT = 2.0
LEXICAL_WEIGHT = 0.7
CUE_WEIGHT = 0.25
#: Added to the similarity of a memory that starts with an entity the query names.
SUBJECT_BONUS = 0.15
#: Added to the similarity of a memory made at a time the query names.
DATE_BONUS = 0.2
#: Multiplies the similarity of a memory that is itself a question (see ``asks``).
QUESTION_FACTOR = 0.8
#: Share of a neighbour's similarity that a memory stored just before or after it gains.
CONTEXT_SHARE = 0.3
#: The match type of a memory found through a neighbour in time.
CONTEXT = "context"
#: Added to the similarity of a memory that says when, for a question asking when
#: (``smriti.engine.query``).
TIME_BONUS = 0.1


@dataclass(slots=True)
class Fusion:
    """One recall's channel scores, its query vector and the contiguity pairs seen."""

    cue: dict[str, float]
    vector: dict[str, float]
    lexical: dict[str, float]
    #: The query's embedding; None when the embedder failed (no cosine evidence).
    query: np.ndarray | None = None
    #: (later, earlier) pairs of memories stored one after the other.
    context: set[tuple[str, str]] = field(default_factory=set)
    #: The entity names of the query, normalised (``normalise_cue_name``).
    subjects: tuple[str, ...] = ()
    #: The time windows of the dates the query names (``smriti.engine.when``).
    when: tuple[Window, ...] = ()
    #: Whether the query asks when something happened (``query.asks_when``).
    asks_when: bool = False
    #: Puts the embedder's cosines on the common scale the weights were chosen on.
    scale: SimilarityScale = field(default_factory=SimilarityScale)

    def similarity(self, engram_id: str, cosine: float) -> float:
        """The weighted mean of the three channels' evidence for one memory."""
        vector_weight = VECTOR_WEIGHT if self.query is not None else 0.0
        return (
            vector_weight * max(0.0, self.scale.common(cosine))
            + LEXICAL_WEIGHT * self.lexical.get(engram_id, 0.0)
            + CUE_WEIGHT * self.cue.get(engram_id, 0.0)
        ) / (vector_weight + LEXICAL_WEIGHT + CUE_WEIGHT)

    def provisional(self, found: Mapping[str, Candidate]) -> None:
        """Give every direct hit its fused similarity before the pool is loaded (the
        arithmetic of ``similarity``, inlined: a recall has hundreds of direct hits)."""
        floor = min(self.vector.values(), default=0.0)
        vector_weight = VECTOR_WEIGHT if self.query is not None else 0.0
        total = vector_weight + LEXICAL_WEIGHT + CUE_WEIGHT
        vector, lexical, cue, common = self.vector, self.lexical, self.cue, self.scale.common
        for engram_id, candidate in found.items():
            if candidate.hop == 0:
                cosine = max(0.0, common(vector.get(engram_id, floor)))
                candidate.similarity = (
                    vector_weight * cosine
                    + LEXICAL_WEIGHT * lexical.get(engram_id, 0.0)
                    + CUE_WEIGHT * cue.get(engram_id, 0.0)
                ) / total

    def rescore(self, found: Mapping[str, Candidate], pool: dict[str, Engram]) -> None:
        """Exact fused similarity of the pool's direct hits and context neighbours, each
        raised by its strongest neighbour in time (capped at 1).

        A context neighbour whose neighbours in time are not in the pool (a filter left
        them out) leaves the pool: it was found through them alone."""
        scored = [i for i in pool if found[i].hop == 0 or found[i].match_type == CONTEXT]
        cosines = self.cosines(scored, pool)
        own: dict[str, float] = {}
        for engram_id in scored:
            value = self.similarity(engram_id, cosines[engram_id])
            if leads(pool[engram_id].content, self.subjects):
                value += SUBJECT_BONUS
            if self.when and any(w.contains(pool[engram_id].created_at) for w in self.when):
                value += DATE_BONUS
            if self.asks_when and says_when(pool[engram_id].content):
                value += TIME_BONUS
            own[engram_id] = value
        gain: dict[str, float] = {}
        for later, earlier in self.context:
            for here, there in ((later, earlier), (earlier, later)):
                if here in own and there in own:
                    gain[here] = max(gain.get(here, 0.0), CONTEXT_SHARE * own[there])
        for engram_id, value in own.items():
            if found[engram_id].match_type == CONTEXT and engram_id not in gain:
                del pool[engram_id]
                continue
            value = min(1.0, value + gain.get(engram_id, 0.0))
            if asks(pool[engram_id].content):
                value *= QUESTION_FACTOR
            found[engram_id].similarity = value

    def cosines(self, ids: list[str], pool: Mapping[str, Engram]) -> dict[str, float]:
        """The query's cosine similarity to each of ``ids``: the vector channel's where it
        has one, else from the engram's embedding in one product (0 without either)."""
        out = {i: self.vector.get(i, 0.0) for i in ids}
        missing = [i for i in ids if i not in self.vector and pool[i].embedding is not None]
        if self.query is None or not missing:
            return out
        rows = np.stack([pool[i].embedding for i in missing]).astype(np.float32)
        norms = np.linalg.norm(rows, axis=1)
        norms[norms == 0] = 1.0
        values = np.clip((rows @ unit(self.query)) / norms, -1.0, 1.0)
        out.update(zip(missing, values.tolist(), strict=True))
        return out


def leads(content: str, names: tuple[str, ...]) -> bool:
    """Whether ``content`` starts with one of ``names`` as a whole word (both compared
    as cue names are: NFKC, lower case, whitespace collapsed)."""
    if not names:
        return False
    text = normalise_cue_name(content[:200])
    for name in names:
        if text.startswith(name) and not text[len(name) : len(name) + 1].isalnum():
            return True
    return False


def asks(content: str) -> bool:
    """Whether ``content`` ends as a question (its last sentence asks something)."""
    return content.rstrip().endswith("?")
