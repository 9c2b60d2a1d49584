"""The clusterer contract: a weighted graph in, a community per node out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.setting import Setting


@dataclass(slots=True)
class ClusterResult:
    """Community ids by node id, and state to persist for the next run."""

    membership: dict[str, int]
    state: dict[str, object] = field(default_factory=dict)


class Clusterer(ABC):
    """Base class of clusterers; register subclasses with ``register_clusterers``."""

    name: ClassVar[str]
    priority: ClassVar[int] = 0
    description: ClassVar[str] = ""
    #: The settings (environment variables) this component reads (``smriti.Setting``):
    #: validated at startup, listed by ``smriti doctor`` and the settings reference.
    declared_settings: ClassVar[tuple[Setting[Any], ...]] = ()

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: Settings) -> Clusterer | None:
        """An instance, or None when this clusterer cannot run here."""

    @abstractmethod
    def cluster(
        self,
        nodes: Sequence[str],
        edges: Sequence[tuple[str, str, float]],
        state: Mapping[str, object],
        previous: Mapping[str, int],
    ) -> ClusterResult:
        """Partition ``nodes`` using the undirected weighted ``edges``.

        ``state`` is what the previous run returned (e.g. a tuned resolution), empty
        on the first run. ``previous`` holds current cluster ids so that communities
        that persist can keep their ids. Deterministic for equal input.
        """
