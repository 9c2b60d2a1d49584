"""Composite scoring and decay: formulas as SPEC §6 and §7 say."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from smriti.backend import EngramStats
from smriti.engine.consolidate import decay_of
from smriti.engine.scoring import Weights, composite, recency, seed_cluster
from smriti.model import Engram, utcnow


def engram(
    hours_ago: float = 0.0, importance: float = 0.5, decay: float = 1.0, cluster: int = -1
) -> Engram:
    now = utcnow()
    return Engram(
        "e",
        "c",
        "s",
        "semantic",
        importance,
        now,
        now - timedelta(hours=hours_ago),
        decay_factor=decay,
        cluster_id=cluster,
    )


def test_recency_halves_after_a_day() -> None:
    now = utcnow()
    assert recency(engram(0), now) == pytest.approx(1.0, abs=1e-3)
    assert recency(engram(24), now) == pytest.approx(0.5, abs=1e-3)


def test_composite_matches_the_reference_formula() -> None:
    now = utcnow()
    e = engram(24, importance=0.8, decay=0.6, cluster=2)
    w = Weights()
    direct = composite(e, 0.9, 0, seed=2, now=now, w=w)
    assert direct == pytest.approx(0.4 * 0.9 + 0.2 * 0.5 + 0.2 * 0.8 + 0.2 * 0.6, abs=1e-3)
    assert composite(e, 0.9, 1, seed=2, now=now, w=w) == pytest.approx(direct / 2, rel=1e-6)
    assert composite(e, 0.9, 1, seed=5, now=now, w=w) == pytest.approx(direct / 4, rel=1e-6)
    assert composite(e, 0.9, 0, seed=5, now=now, w=w) == pytest.approx(direct, rel=1e-6)


def test_seed_cluster_is_most_common_with_deterministic_ties() -> None:
    hits = [engram(cluster=c) for c in (3, 1, 3, 1, -1, -1, -1)]
    assert seed_cluster(hits) == 1
    assert seed_cluster([engram(cluster=-1)]) == -1


def stats(days: float, access: int = 0, decay: float = 1.0) -> EngramStats:
    return EngramStats("e", 0.5, access, utcnow() - timedelta(days=days), decay, -1)


def test_decay_is_computed_from_access_time_not_compounded() -> None:
    now = utcnow()
    once, _ = decay_of(stats(30), now, 0.01)
    assert once == pytest.approx(math.exp(-0.3), rel=1e-4)
    # running again with the already-decayed value stored gives the same result
    again, _ = decay_of(stats(30, decay=once), now, 0.01)
    assert again == pytest.approx(once, rel=1e-9)


def test_frequent_access_strengthens_capped() -> None:
    now = utcnow()
    value, strengthened = decay_of(stats(100, access=50), now, 0.01)
    assert strengthened and value == pytest.approx(math.exp(-1.0) + 0.1, rel=1e-4)
    _, weak = decay_of(stats(100, access=5), now, 0.01)
    assert not weak
