"""Query analysis without an LLM: whom a question is about and whether it asks when
(smriti.engine.query), and what recall makes of both (on SMRITI_TEST_BACKEND)."""

from __future__ import annotations

from smriti.engine import Engine
from smriti.engine.query import asks_when, says_when, subjects


def test_subjects_drop_possessives_and_add_capitalised_names() -> None:
    assert subjects("What are Joanna's hobbies?", ["joanna's"]) == ("joanna",)
    assert subjects("What are Joanna’s hobbies?", []) == ("joanna",)
    # The extractor took "Jon" for an ordinary word; the capital says it is a name.
    assert subjects("When Jon has lost his job as a banker?", []) == ("jon",)
    # Initials end like sentences: "Lewis" is left to the entity "c. s. lewis".
    assert subjects("Would Tim enjoy books by C. S. Lewis?", ["c. s. lewis"]) == (
        "c. s. lewis",
        "tim",
    )
    assert subjects("Where did she go?", []) == (), "the first word is capitalised anyway"
    assert subjects("We camped. The kids loved it! Where did Mel go?", []) == ("mel",), (
        "a sentence's first word is capitalised anyway"
    )


def test_asks_when_and_says_when() -> None:
    for question in (
        "When did Melanie paint a sunrise?",
        "what year did John move?",
        "How long ago was Caroline's 18th birthday?",
        "In which month did they meet?",
    ):
        assert asks_when(question), question
    for question in ("What did Melanie paint?", "Where has Melanie camped?", "Whenever?"):
        assert not asks_when(question), question
    for content in ("I went yesterday", "We moved in 2019", "Last Friday we", "two weeks ago"):
        assert says_when(content), content
    for content in ("I love painting sunsets", "The lastly mentioned weekday", "Mayor"):
        assert not says_when(content), content


OTHER = (
    "Caroline: The train to the city was late again.",
    "Caroline: My favourite book this year is about ocean currents.",
)


def _order(engine: Engine, query: str) -> list[str]:
    return [r.engram.content for r in engine.recall(query, limit=10)]


def test_a_when_question_favours_the_memory_that_says_when(engine: Engine) -> None:
    plain = (
        "Melanie: I painted a sunrise over the lake, and the colours came out better than"
        " I had hoped."
    )
    dated = (
        "Melanie: I painted a sunrise over the lake yesterday, and the kids loved mixing"
        " the colours."
    )
    # Unrelated memories in between: neither painting shares the other's match in time.
    for text in (plain, OTHER[0], dated, OTHER[1]):
        engine.store(text)
    # Asked what, the closer wording wins (it does for "when" too, without the bonus).
    assert _order(engine, "What did Melanie paint over the lake?")[0] == plain
    assert _order(engine, "When did Melanie paint a sunrise over the lake?")[0] == dated


def test_a_possessive_or_unrecognised_name_still_favours_its_speaker(engine: Engine) -> None:
    # Caroline's memory is worded more like the questions; Melanie is whom they ask about.
    theirs = (
        "Caroline: My kids paint at school most days, it keeps them busy and happy and out"
        " of trouble."
    )
    hers = (
        "Melanie: The kids made a sunrise painting in class, it was quite a sight to see for"
        " everyone."
    )
    for text in (theirs, hers):
        engine.store(text)
    assert _order(engine, "What did Melanie's kids paint at school?")[0] == hers
    assert _order(engine, "Would Melanie say her kids paint at school?")[0] == hers
    assert _order(engine, "What did Caroline's kids paint at school?")[0] == theirs
