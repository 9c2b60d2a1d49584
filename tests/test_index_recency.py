"""The working set's listing order (smriti.index.recency) against a plain sort."""

from __future__ import annotations

import random

import pytest

from smriti.index import recency
from smriti.index.recency import RecencyOrder


def test_the_order_matches_a_sort_through_moves_removals_and_merges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recency, "HEAD_MAX", 16)
    rng = random.Random(7)
    order, want = RecencyOrder(), {}
    order.load((float(i), float(i), f"m{i:03d}") for i in range(200))
    want.update({f"m{i:03d}": (float(i), float(i), f"m{i:03d}") for i in range(200)})
    for step in range(2000):
        engram = f"m{rng.randrange(220):03d}"
        if rng.random() < 0.1:
            order.remove(engram)
            want.pop(engram, None)
            continue
        # Moves to new and to earlier keys (an access restored to an older time), with
        # equal times so that the id decides (descending, as the listing orders it).
        stamp = float(rng.choice([step + 500, rng.randrange(300)]))
        key = (stamp, float(rng.randrange(3)), engram)
        order.put(key)
        want[engram] = key
        if step % 97 == 0:
            expected = [k[2] for k in sorted(want.values(), reverse=True)]
            assert list(order.newest()) == expected
            assert order.head(25) == expected[:25]
            assert order.ascending() == expected[::-1]
            assert len(order) == len(want)
            # A page after any key starts right after it and skips nothing.
            keys = sorted(want.values(), reverse=True)
            for after in (keys[0], keys[len(keys) // 2], keys[-1]):
                rest = [k[2] for k in keys if k < after]
                assert order.head(10, after) == rest[:10]
                assert list(order.newest(after)) == rest
    assert list(order.newest()) == [k[2] for k in sorted(want.values(), reverse=True)]


def test_ties_on_both_times_are_listed_by_id_descending() -> None:
    order = RecencyOrder()
    order.load([(5.0, 1.0, "a"), (5.0, 1.0, "c"), (5.0, 2.0, "b"), (4.0, 9.0, "z")])
    assert list(order.newest()) == ["b", "c", "a", "z"]
    assert order.head(2, (5.0, 1.0, "c")) == ["a", "z"]
