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

    def close(self) -> None:  # noqa: B027 - optional hook for subclasses
        """Release clients or models."""
