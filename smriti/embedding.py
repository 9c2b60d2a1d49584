"""The embedder contract: text in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from smriti.config import Settings


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

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> Embedder | None:
        """An instance, or None when settings do not configure this embedder.

        ``explicit`` is True when the user named this embedder; then return an
        instance or raise ConfigError saying what is missing.
        """

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

    def close(self) -> None:  # noqa: B027 - optional hook for subclasses
        """Release clients or models."""
