"""The embedder contract: text in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.doctor.checks import Check as DoctorCheck
    from smriti.setting import Setting


class Embedder(ABC):
    """Base class of embedders; register subclasses with ``register_embedders``.

    With ``SMRITI_EMBEDDER=auto`` the engine asks every registered class for an
    instance via ``from_settings`` and uses the one with the highest ``priority``
    that returns one.
    """

    #: The ``SMRITI_EMBEDDER`` value that selects this embedder.
    name: ClassVar[str]
    #: Rank among configured embedders when ``SMRITI_EMBEDDER=auto`` (higher wins).
    priority: ClassVar[int] = 0
    description: ClassVar[str] = ""
    #: The settings (environment variables) this component reads (``smriti.Setting``):
    #: validated at startup, listed by ``smriti doctor`` and the settings reference.
    declared_settings: ClassVar[tuple[Setting[Any], ...]] = ()

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> Embedder | None:
        """An instance, or None when settings do not configure this embedder.

        ``explicit`` is True when the user named this embedder; then return an
        instance or raise ConfigError saying what is missing.
        """

    @classmethod
    def doctor_check(cls, settings: Settings, *, explicit: bool) -> DoctorCheck | None:
        """What ``smriti doctor`` says of this embedder when the settings may choose it,
        found without loading a model or calling a server (``explicit``: the user named
        it, so it cannot fall back). None (the default): doctor describes a built-in
        from ``from_settings``, and reports a plugin's as not started."""
        return None

    @property
    @abstractmethod
    def model_id(self) -> str:
        """A stable identifier of the vector space: ``<name>:<model...>:<dims>``.

        It begins with the embedder's ``name`` and a colon, so the engine can tell which
        embedder made a store. Vectors from embedders with different ids must never be
        mixed in one store.
        """

    @property
    @abstractmethod
    def dims(self) -> int | None:
        """The vector dimension, or None until the first vector has been seen."""

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in one batch: an (n, dims) float32 array of unit-length rows.

        Raises ProviderError when the provider fails after its retries.
        """

    @property
    def similarity_baseline(self) -> float:
        """The cosine this model gives unrelated texts, put at zero of the engine's scale.

        Models differ in how far apart they place unrelated texts: all-MiniLM-L6-v2
        gives them about 0.29, bge-small-en-v1.5 about 0.63. The engine's thresholds
        (``ASSOCIATION_THRESHOLD``, ``DEDUP_THRESHOLD``, ``CONFLICT_THRESHOLD``, recall's
        floors) and its fusion weights are on one common scale, the scale this baseline
        maps a model onto (``SimilarityScale``): a cosine ``c`` counts as
        ``(c - b) / (1 - b)``. 0 (the default) leaves cosines as they are, which is
        right for models that spread unrelated texts as widely as all-MiniLM-L6-v2.
        """
        return 0.0

    def for_model(self, model_id: str) -> Embedder | None:
        """An embedder of this kind that makes ``model_id``'s vectors, or None.

        The engine asks this when a store was embedded with another model than the
        configured one (an earlier default model), so the store keeps working with its
        own model until ``smriti reembed`` moves it. None (the default): not available.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook for subclasses
        """Release clients or models."""


class SimilarityScale:
    """Cosines of one model on the engine's common scale, and thresholds back on the
    model's own: ``common(c) = (c - b) / (1 - b)`` and ``raw(t) = b + t (1 - b)`` for
    the embedder's ``similarity_baseline`` ``b``. With ``b = 0`` both are the identity."""

    __slots__ = ("baseline",)

    def __init__(self, baseline: float = 0.0) -> None:
        if not 0.0 <= baseline < 1.0:
            raise ValueError(f"a similarity baseline must be in [0, 1), got {baseline}")
        self.baseline = float(baseline)

    def common(self, cosine: float) -> float:
        """The model's cosine on the common scale (1 stays 1; unrelated texts near 0.29)."""
        if self.baseline == 0.0:
            return cosine
        return (cosine - self.baseline) / (1.0 - self.baseline)

    def raw(self, value: float) -> float:
        """The model's cosine that a common-scale value (a threshold) corresponds to;
        -1 (no bar at all) stays -1."""
        if self.baseline == 0.0 or value <= -1.0:
            return value
        return self.baseline + value * (1.0 - self.baseline)

    def __repr__(self) -> str:
        return f"SimilarityScale({self.baseline})"
