"""Query-side relaxed matching: a question's words match the other inflections of
their stems (``smriti.engine.inflection``), in the lexical channel of recall."""

from __future__ import annotations

import pytest

from smriti.engine import Engine
from smriti.engine.inflection import bases, forms, relaxed


@pytest.mark.parametrize(
    ("word", "expected", "absent"),
    [
        ("camped", {"camp", "camping", "camps"}, set()),
        ("painting", {"paint", "painted", "paints"}, set()),
        ("baked", {"bake", "baking", "bakes"}, set()),
        ("married", {"marry", "marrying", "marries"}, {"marri"}),
        ("planning", {"plan", "planned", "plans"}, set()),
        ("open", {"opened", "opening", "opens"}, set()),
        ("destress", {"destressed", "destressing"}, {"destres"}),
        ("offer", {"offered", "offering", "offers"}, {"off", "offs"}),
    ],
)
def test_forms_of_regular_inflections(word: str, expected: set[str], absent: set[str]) -> None:
    got = forms(word)
    assert expected <= got, (word, got)
    assert not absent & got, (word, got)
    assert not absent & bases(word)


def test_relaxed_appends_forms_and_leaves_names_and_short_words() -> None:
    text = "Where has Melanie camped with Bob?"
    out = relaxed(text)
    assert out.startswith(text + " "), "the query's own words come first"
    added = out[len(text) :].split()
    assert "camping" in added and "camp" in added
    assert not any(w.startswith(("melani", "bob")) for w in added), added
    assert relaxed("Who is he?") == "Who is he?"


def test_recall_finds_the_statement_in_another_inflection(engine: Engine) -> None:
    wanted = engine.store("Melanie: We went camping in the mountains last weekend.").engram.id
    for text in (
        "Melanie: The pottery class on Tuesdays was great fun, where has the time gone?",
        "Melanie: My favourite book this year is about ocean currents.",
        "Melanie: The garden needs more sunflowers next spring.",
        "Melanie: Where has my hat gone? I had it at the lake.",
    ):
        engine.store(text)
    results = engine.recall("Where has Melanie camped?", limit=2)
    assert results[0].engram.id == wanted, [r.engram.content for r in results]
