"""The backup-provider contract: push a consistent snapshot, restore it on a new machine."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from smriti.config import Settings


@dataclass(slots=True)
class SyncReport:
    """What a sync did."""

    provider: str
    pushed: list[str] = field(default_factory=list)
    skipped: int = 0
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form for tools and the CLI."""
        return {
            "provider": self.provider,
            "pushed": self.pushed,
            "skipped": self.skipped,
            "message": self.message,
        }


class BackupProvider(ABC):
    """Base class of backup providers; register subclasses with ``register_backup_providers``.

    The engine writes a consistent snapshot (a portable export) into a directory and
    hands it to ``push``; ``restore`` fills a directory with the latest snapshot.
    """

    #: The ``BACKUP_TYPE`` value that selects this provider.
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""

    def __init__(self, settings: Settings, user: str) -> None:
        self.settings = settings
        self.user = user

    @abstractmethod
    def restore(self, target: Path) -> bool:
        """Fetch the latest snapshot into directory ``target``.

        Called at startup before the store serves. Returns False when there is no
        backup yet. Raises BackupError when the remote cannot be reached.
        """

    @abstractmethod
    def push(self, snapshot: Path) -> SyncReport:
        """Upload the snapshot directory ``snapshot``; skip what is unchanged."""

    def close(self) -> None:  # noqa: B027 - optional hook for subclasses
        """Release clients."""
