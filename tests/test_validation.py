"""Argument validation at the edge: every bad value is a clear InvalidInput."""

from __future__ import annotations

import math

import pytest

from smriti import validation as v
from smriti.errors import InvalidInput


@pytest.mark.parametrize("bad", ["", "   ", "\n\t", None, 5, "x" * 101, "a\x00b"])
def test_content_rejected(bad: object) -> None:
    with pytest.raises(InvalidInput):
        v.content(bad, max_chars=100)


def test_content_kept_verbatim_apart_from_outer_whitespace() -> None:
    text = '  "}) MATCH (n) DETACH DELETE n // — नमस्ते 🍎  '
    assert v.content(text, 1000) == text.strip()


@pytest.mark.parametrize("bad", [-0.1, 1.01, math.nan, "abc", None, True, [0.5], math.inf])
def test_importance_rejected(bad: object) -> None:
    with pytest.raises(InvalidInput):
        v.importance(bad)


@pytest.mark.parametrize(("given", "want"), [(0, 0.0), (1, 1.0), ("0.25", 0.25), (0.5, 0.5)])
def test_importance_accepted(given: object, want: float) -> None:
    assert v.importance(given) == want


@pytest.mark.parametrize("bad", [0, -1, 10**9, 101, "abc", 2.5, None, True])
def test_limit_rejected(bad: object) -> None:
    with pytest.raises(InvalidInput):
        v.limit(bad, maximum=100)


def test_mode_memory_type_and_query() -> None:
    assert v.mode("") == "recall" and v.mode("list") == "list"
    for bad in ("vector", "RECALL", 3):
        with pytest.raises(InvalidInput):
            v.mode(bad)
    assert v.memory_type("") is None and v.memory_type("Episodic") == "episodic"
    with pytest.raises(InvalidInput):
        v.memory_type("dream")
    assert v.query("  ") is None
    with pytest.raises(InvalidInput):
        v.query("x" * 5000)


def test_tags_split_trim_dedupe_and_bound() -> None:
    assert v.tags(" a, b ,a,, c d ") == ["a", "b", "c d"]
    assert v.tags(None) == []
    with pytest.raises(InvalidInput):
        v.tags(",".join(str(i) for i in range(40)))
    with pytest.raises(InvalidInput):
        v.tags("x" * 65)
    with pytest.raises(InvalidInput):
        v.tags(5)


def test_memory_id_required() -> None:
    for bad in ("", "  ", None, "x" * 500):
        with pytest.raises(InvalidInput):
            v.memory_id(bad)
    assert v.memory_id(" abc ") == "abc"
