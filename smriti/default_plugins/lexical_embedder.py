"""The built-in deterministic lexical embedder: works offline, with no model and no key.

Texts become signed feature-hashed bags of stemmed terms (and, with a lower weight,
character trigrams of each term, so near spellings stay close), L2-normalised. Cosine
between two texts then reflects shared vocabulary, which is what lexical recall needs
when no semantic model is configured.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from smriti import Embedder, Settings, hookimpl
from smriti.backend import terms

DIMS = 384
TRIGRAM_WEIGHT = 0.35


@lru_cache(maxsize=262144)
def _slot(feature: str) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % DIMS, (1.0 if (value >> 63) & 1 else -1.0)


def _features(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for term in terms(text):
        counts["w:" + term] += 1.0
        padded = f"#{term}#"
        for i in range(len(padded) - 2):
            counts["g:" + padded[i : i + 3]] += TRIGRAM_WEIGHT
    return counts


class LexicalEmbedder(Embedder):
    """Feature-hashed bag-of-terms vectors (384 dimensions), deterministic and offline."""

    name = "lexical"
    priority = 0
    description = "built-in deterministic lexical embedder (no model, no API)"

    @classmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> LexicalEmbedder:
        return cls()

    @property
    def model_id(self) -> str:
        return f"lexical:v1:{DIMS}"

    @property
    def dims(self) -> int:
        return DIMS

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, count in _features(text).items():
                slot, sign = _slot(feature)
                out[row, slot] += sign * (1.0 + math.log(count)) if count >= 1 else sign * count
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    return [LexicalEmbedder]
