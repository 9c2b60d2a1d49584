"""Temporal contiguity: a memory follows the one stored just before it, and recall lets
a strong match raise its neighbours in time (on SMRITI_TEST_BACKEND)."""

from __future__ import annotations

import time
from datetime import timedelta

from smriti.engine import Engine
from smriti.engine.contiguity import FOLLOWS, Timeline
from smriti.model import utcnow

from .conftest import EngineFactory

QUESTION = "Melanie: We celebrated my daughter's birthday with a concert last night."
ANSWER = "Melanie: It was Matt Patterson, he is so talented!"
OTHERS = (
    "Caroline: I started a pottery class on Tuesdays.",
    "Caroline: My favourite book this year is about ocean currents.",
    "Melanie: The garden needs more sunflowers next spring.",
    "Caroline: The train to the city was late again this morning.",
)


def _relations(engine: Engine, memory_id: str) -> set[tuple[str, str, str]]:
    got = engine.get(memory_id)["associations"]
    return {(a["direction"], a["relation"], a["id"]) for a in got}


def test_timeline_links_within_the_window_only() -> None:
    line = Timeline(60)
    now = utcnow()
    assert line.advance("a", now) is None
    assert line.advance("b", now + timedelta(seconds=30)) == "a"
    assert line.advance("c", now + timedelta(seconds=200)) is None, "past the window"
    line.forget("c")
    assert line.advance("d", now + timedelta(seconds=201)) is None, "c was forgotten"
    off = Timeline(0)
    assert off.advance("a", now) is None and off.advance("b", now) is None


def test_each_memory_follows_the_one_stored_before_it(engine: Engine) -> None:
    first = engine.store(QUESTION).engram.id
    second = engine.store(ANSWER).engram.id
    third = engine.store(OTHERS[0]).engram.id
    assert ("out", FOLLOWS, first) in _relations(engine, second)
    assert ("in", FOLLOWS, third) in _relations(engine, second)
    assert not any(r == FOLLOWS and d == "out" for d, r, _ in _relations(engine, first))
    related = {r["id"]: r["relation"] for r in engine.related(second)["related"]}
    assert related[first] == "follows" and related[third] == "followed_by"


def test_no_link_when_contiguity_is_off_or_the_gap_is_long(
    engine_factory: EngineFactory,
) -> None:
    off = engine_factory(CONTIGUITY_SECONDS="0")
    a = off.store(QUESTION).engram.id
    b = off.store(ANSWER).engram.id
    assert not any(r == FOLLOWS for _, r, _ in _relations(off, b))
    assert not any(r == FOLLOWS for _, r, _ in _relations(off, a))
    short = engine_factory(user="bob", CONTIGUITY_SECONDS="1")
    short.store(QUESTION)
    time.sleep(1.2)
    c = short.store(ANSWER).engram.id
    assert not any(r == FOLLOWS for _, r, _ in _relations(short, c))


def test_a_forgotten_memory_is_not_followed(engine: Engine) -> None:
    gone = engine.store(QUESTION).engram.id
    engine.forget(gone)
    after = engine.store(ANSWER).engram.id
    assert not any(r == FOLLOWS for _, r, _ in _relations(engine, after))


def test_a_correction_neither_follows_nor_inherits_the_timeline(engine: Engine) -> None:
    before = engine.store(QUESTION).engram.id
    old = engine.store(ANSWER).engram.id
    new = engine.correct(old, "Melanie: It was Matt Patterson and his band.")["new_id"]
    relations = _relations(engine, new)
    assert not any(r == FOLLOWS for _, r, _ in relations), relations
    assert ("out", FOLLOWS, before) in _relations(engine, old)
    nxt = engine.store(OTHERS[1]).engram.id
    assert ("out", FOLLOWS, old) in _relations(engine, nxt), "the correction is not a turn"


def _answer_score(engine: Engine) -> tuple[float, str]:
    for text in (QUESTION, ANSWER, *OTHERS):
        engine.store(text)
    results = engine.recall("Who performed at the concert for the birthday?", limit=10)
    hit = next(r for r in results if r.engram.content == ANSWER)
    return hit.score, hit.match_type


def test_a_strong_match_raises_the_memory_stored_after_it(
    engine_factory: EngineFactory,
) -> None:
    with_context, _ = _answer_score(engine_factory())
    without, _ = _answer_score(engine_factory(user="bob", CONTIGUITY_SECONDS="0"))
    assert with_context > without + 0.01, (with_context, without)


def test_fusion_adds_a_share_of_the_neighbours_similarity() -> None:
    import numpy as np

    from smriti.engine.fusion import CONTEXT, CONTEXT_SHARE, Fusion
    from smriti.engine.recall import Candidate
    from smriti.model import Engram

    query = np.array([1.0, 0.0], dtype=np.float32)
    fusion = Fusion(cue={}, vector={"q": 0.9}, lexical={"q": 1.0}, query=query)
    fusion.context.add(("a", "q"))  # a was stored just after q
    found = {"q": Candidate(0.0, "vector", 0), "a": Candidate(0.0, CONTEXT, 1)}
    now = utcnow()
    pool = {
        i: Engram(i, i, i, "semantic", 0.5, now, now, embedding=np.array(v, dtype=np.float32))
        for i, v in (("q", [1.0, 0.0]), ("a", [0.0, 1.0]))
    }
    fusion.rescore(found, pool)
    own_q = fusion.similarity("q", 0.9)
    # a matches nothing itself: all it has is its share of q's similarity.
    assert found["a"].similarity > 0.1
    assert found["a"].similarity == CONTEXT_SHARE * own_q
    assert found["q"].similarity == min(1.0, own_q + CONTEXT_SHARE * fusion.similarity("a", 0.0))
    both = fusion.similarity("q", 0.9)
    only_vector = Fusion(cue={}, vector={"q": 0.9}, lexical={}, query=query).similarity("q", 0.9)
    assert both > only_vector, "agreement between channels counts"


def test_the_question_factor_leaves_the_answers_share_whole() -> None:
    import numpy as np

    from smriti.engine.fusion import CONTEXT, CONTEXT_SHARE, QUESTION_FACTOR, Fusion, asks
    from smriti.engine.recall import Candidate
    from smriti.model import Engram

    assert asks("What pet do you have? ") and not asks("Luna? No, Oliver is the cat.")
    query = np.array([1.0, 0.0], dtype=np.float32)
    fusion = Fusion(cue={}, vector={"q": 0.9}, lexical={"q": 1.0}, query=query)
    fusion.context.add(("a", "q"))
    found = {"q": Candidate(0.0, "vector", 0), "a": Candidate(0.0, CONTEXT, 1)}
    now = utcnow()
    pool = {
        i: Engram(i, text, i, "semantic", 0.5, now, now, embedding=np.array(v, dtype=np.float32))
        for i, text, v in (("q", "Which pet?", [1.0, 0.0]), ("a", "A cat.", [0.0, 1.0]))
    }
    fusion.rescore(found, pool)
    own_q = fusion.similarity("q", 0.9)
    assert found["a"].similarity == CONTEXT_SHARE * own_q
    whole = min(1.0, own_q + CONTEXT_SHARE * fusion.similarity("a", 0.0))
    assert found["q"].similarity == whole * QUESTION_FACTOR < whole
