"""The working set's listing order (smriti.index.recency) against a plain sort."""

from __future__ import annotations

import random

from smriti.index import recency
from smriti.index.recency import RecencyOrder


def test_the_order_matches_a_sort_through_moves_removals_and_merges(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(recency, "HEAD_MAX", 16)
    rng = random.Random(7)
    order, want = RecencyOrder(), {}
    order.load((-float(i), -float(i), f"m{i:03d}") for i in range(200))
    want.update({f"m{i:03d}": (-float(i), -float(i), f"m{i:03d}") for i in range(200)})
    for step in range(2000):
        engram = f"m{rng.randrange(220):03d}"
        if rng.random() < 0.1:
            order.remove(engram)
            want.pop(engram, None)
            continue
        # Moves to new and to earlier keys (an access restored to an older time).
        stamp = float(rng.choice([step + 500, rng.randrange(300)]))
        key = (-stamp, -float(rng.randrange(3)), engram)
        order.put(key)
        want[engram] = key
        if step % 97 == 0:
            expected = [k[2] for k in sorted(want.values())]
            assert list(order.newest()) == expected
            assert order.head(25) == expected[:25]
            assert len(order) == len(want)
    assert list(order.newest()) == [k[2] for k in sorted(want.values())]
