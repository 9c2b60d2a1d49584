"""Deterministic builders of engrams, cues and vectors for backend tests."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

import numpy as np

from smriti.backend import unit
from smriti.model import Cue, Engram

#: The base time of built records: every timestamp is T0 plus a whole number of seconds.
T0 = datetime(2024, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)


class GraphBuilder:
    """Builds unit vectors, engrams and cues; the same seed gives the same record."""

    def __init__(self, dims: int) -> None:
        self.dims = dims

    def vec(self, seed: int) -> np.ndarray:
        """A deterministic random unit vector of ``dims`` float32 values."""
        return unit(np.random.default_rng(seed).standard_normal(self.dims))

    def near(self, base: np.ndarray, seed: int, noise: float = 0.1) -> np.ndarray:
        """A unit vector close to ``base`` (cosine well above 0.9 for small noise)."""
        jitter = np.random.default_rng(seed).standard_normal(self.dims) * noise
        return unit(base + jitter.astype(np.float32))

    def engram(self, i: int, **changes: object) -> Engram:
        """Engram number ``i``: id ``e{i:05d}``, distinct text, vector and timestamps."""
        base = Engram(
            id=f"e{i:05d}",
            content=f"memory number {i} about topic{i % 7}",
            summary=f"summary {i}",
            memory_type=("episodic", "semantic", "procedural")[i % 3],
            importance=round(0.1 + (i % 9) / 10, 3),
            created_at=T0 + timedelta(minutes=i),
            last_accessed_at=T0 + timedelta(minutes=i, seconds=30),
            access_count=i % 4,
            decay_factor=round(1.0 - (i % 5) / 10, 3),
            embedding=self.vec(10_000 + i),
            source=f"test-{i}",
            tags=[f"tag{i % 3}", "shared"],
            cluster_id=-1,
        )
        return base.with_changes(**changes) if changes else base

    def cue(self, name: str, seed: int | None = None, cue_type: str = "keyword") -> Cue:
        """A cue named ``name``: id ``c-{name}`` (``c-{name}-{seed}`` with an explicit seed)."""
        if seed is None:
            return Cue(f"c-{name}", name, cue_type, self.vec(zlib.crc32(name.encode())))
        return Cue(f"c-{name}-{seed}", name, cue_type, self.vec(seed))
