"""The one text analyzer (``smriti.backend.text``): one tokeniser, two term streams,
each pinned, because stored full-text terms and lexical embeddings depend on them."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from smriti.backend.text import STOPWORDS, index_terms, stem, terms, tokenize

#: The definitions the streams had before the analyzer was one module: runs of letters
#: and digits of any script, underscores splitting them; apostrophes join words.
RUN = re.compile(r"[^\W_]+")
WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")

#: Letters that stress the tokeniser: underscores, both apostrophes, other scripts,
#: characters NFKC folds (ligature, superscript), a dotted capital I.
TEXT = st.text(alphabet=st.sampled_from(list("ab_'’ -.,1é中ÆßİΣ²ﬁ\t\nXs9ie")), max_size=30)


@given(TEXT)
def test_index_tokens_are_runs_of_letters_and_digits(text: str) -> None:
    assert tokenize(text) == RUN.findall(text.lower())


@given(TEXT)
def test_terms_are_the_words_joined_by_apostrophes(text: str) -> None:
    folded = unicodedata.normalize("NFKC", text).lower()
    want = []
    for w in (w.replace("’", "'") for w in WORD.findall(folded)):
        if w in STOPWORDS or (len(w) < 2 and w.isascii()):
            continue
        want.append(stem(w[:-2] if w.endswith("'s") else w))
    assert terms(text) == want


def test_the_two_streams_on_one_sentence() -> None:
    # The index splits "don't" (and keeps the "t"), stems plurals, drops stopwords.
    assert index_terms("Don't the_strawberries' apples") == ["don", "t", "strawberry", "apple"]
    # terms: "don't" is a stopword, a possessive loses its 's, underscores split words.
    assert terms("Don't eat Alice's strawberries_pie") == ["eat", "alice", "strawberry", "pie"]
