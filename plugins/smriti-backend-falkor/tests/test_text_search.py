"""The full-text channel: the top of the matches by score, cut before the user filter,
exact all the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from smriti_backend_falkor.backend import FalkorBackend
from smriti_backend_falkor.search import SeekInput, SeekPlan

from smriti.backend import Seek
from smriti.testing import GraphBuilder

build = GraphBuilder(16)


def _texts(backend: FalkorBackend, texts: list[str], start: int = 0) -> list[str]:
    engrams = [build.engram(start + i, content=t, summary="", tags=[]) for i, t in enumerate(texts)]
    backend.import_records(engrams, [], [], [], [])
    return [e.id for e in engrams]


def _every_match(backend: FalkorBackend, text: str, k: int) -> list[tuple[str, float]]:
    """The text channel through the statement that filters every match before the cut
    (the same order: score, then internal node id), best first as ``seek`` returns it."""
    answer = backend._run_seek(SeekPlan(text="all"), SeekInput.of(Seek(k, text=text)))
    hits = ((str(i), float(s)) for i, s in answer.row["text_hits"])
    return sorted(hits, key=lambda p: (-p[1], p[0]))


def test_the_top_of_the_matches_is_the_exact_top_k(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    """Scores differ by repetition (with ties); every memory matches, so the fetch is full."""
    alice = make_backend("alice")
    _texts(alice, [" ".join(["harbor"] * (1 + i % 9) + ["note"] * 9) for i in range(200)])
    got = alice.seek(Seek(10, text="harbor")).text
    assert len(got) == 10
    assert got == _every_match(alice, "harbor", 10)


def test_a_crowded_graph_falls_back_to_filtering_every_match(
    make_backend: Callable[..., FalkorBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice's memories outscore bob's and fill the whole fetch: bob still gets his top k,
    through a second statement."""
    alice, bob = make_backend("alice"), make_backend("bob")
    _texts(alice, ["harbor"] * 150)  # the best score a memory can have for "harbor"
    mine = _texts(bob, [f"harbor {'quay ' * i}" for i in range(1, 9)], start=1000)
    plans: list[SeekPlan] = []
    run = FalkorBackend._run_seek

    def spy(self: FalkorBackend, plan: SeekPlan, ask: SeekInput) -> Any:
        plans.append(plan)
        return run(self, plan, ask)

    monkeypatch.setattr(FalkorBackend, "_run_seek", spy)
    got = bob.seek(Seek(5, text="harbor")).text
    assert [p.text for p in plans] == ["top", "all"]
    assert len(got) == 5 and {i for i, _ in got} <= set(mine)
    assert got == _every_match(bob, "harbor", 5)
    # Bob's first memory is his shortest, so his best match.
    assert got[0][0] == mine[0]


def test_a_user_with_few_matches_needs_no_second_statement(
    make_backend: Callable[..., FalkorBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fewer matches than the fetch: every one was read, so fewer than k is the answer."""
    alice = make_backend("alice")
    ids = _texts(alice, ["harbor lights", "harbor walls", "quiet street"])
    plans: list[SeekPlan] = []
    run = FalkorBackend._run_seek
    monkeypatch.setattr(
        FalkorBackend, "_run_seek", lambda self, p, a: plans.append(p) or run(self, p, a)
    )
    got = alice.seek(Seek(10, text="harbor")).text
    assert {i for i, _ in got} == set(ids[:2])
    assert [p.text for p in plans] == ["top"]
