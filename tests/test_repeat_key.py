"""The repeat key's ASCII fast path gives exactly the key of the general path."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from smriti.engine.duplicates import _normalised_unicode, normalised_text

ASCII = st.text(alphabet=st.sampled_from(string.printable + "\x00\x7f"), max_size=40)


@given(ASCII)
def test_ascii_texts_key_as_the_general_path_does(text: str) -> None:
    assert normalised_text(text) == _normalised_unicode(text)


def test_the_key_keeps_a_numbers_punctuation_and_drops_the_rest() -> None:
    assert normalised_text("We chose  Option A.") == "we chose option a"
    key = normalised_text("It costs 3.5, not 35; -5 at 10:30!")
    assert key == "it costs 3.5 not 35 -5 at 10:30"
    assert normalised_text("well-known x-5") == "well known x 5"
    assert normalised_text("Café\u200b au lait") == normalised_text("cafe\u0301 AU lait")
