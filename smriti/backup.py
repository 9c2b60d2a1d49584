"""The backup-provider contract: push a consistent snapshot, restore it on a new machine.

Several machines may back up one user to one remote. The engine never lets one of them
overwrite a snapshot it has not merged: it ``fetch``es the remote snapshot (with an
opaque version), merges it into the local store when it changed, and ``push_if``es
the new snapshot on the condition that the remote still holds the version fetched. A
provider that cannot write conditionally keeps the defaults below (last writer wins).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from smriti.errors import BackupError

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.setting import Setting


class SnapshotConflict(BackupError):
    """``push_if`` found a newer remote snapshot than the one fetched: fetch, merge, retry."""


@dataclass(slots=True)
class SyncReport:
    """What a sync did."""

    provider: str
    pushed: list[str] = field(default_factory=list)
    skipped: int = 0
    message: str = ""
    #: The remote snapshot's version after this sync (see ``Fetched.version``).
    version: str | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form for tools and the CLI."""
        return {
            "provider": self.provider,
            "pushed": self.pushed,
            "skipped": self.skipped,
            "message": self.message,
        }


@dataclass(slots=True, frozen=True)
class Fetched:
    """What ``BackupProvider.fetch`` found on the remote."""

    #: Where the snapshot lives, for messages: remote (credentials redacted) and the
    #: path inside it, never a local temporary directory.
    where: str
    #: Identifies the remote snapshot's content (a git blob id, an S3 ETag); None when
    #: there is no snapshot, or when the provider cannot tell (then it always downloads).
    version: str | None = None
    #: Whether the snapshot files were written into the target directory.
    downloaded: bool = False
    #: Provider state handed back to ``push_if`` (the commit or ETag the push builds on).
    base: Any = None


class BackupProvider(ABC):
    """Base class of backup providers; register subclasses with ``register_backup_providers``.

    The engine writes a consistent snapshot (a portable export) into a directory and
    hands it to ``push``; ``restore`` fills a directory with the latest snapshot.
    """

    #: The ``BACKUP_TYPE`` value that selects this provider.
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""
    #: The settings (environment variables) this component reads (``smriti.Setting``):
    #: validated at startup, listed by ``smriti doctor`` and the settings reference.
    declared_settings: ClassVar[tuple[Setting[Any], ...]] = ()

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

    def location(self) -> str:
        """Where this provider's snapshot lives, for messages (no credentials)."""
        return f"the {self.name} backup of {self.user}"

    def fetch(self, target: Path, known: str | None) -> Fetched:
        """Fetch the remote snapshot into ``target`` unless its version is ``known``.

        Called before every push. ``known`` is the version this store merged last (None
        for never). Returns what was found; ``downloaded`` is False when there is no
        snapshot or its version equals ``known``. Raises BackupError when the remote
        cannot be reached. The default calls ``restore`` (always downloads).
        """
        return Fetched(self.location(), None, self.restore(target))

    def push_if(self, snapshot: Path, fetched: Fetched) -> SyncReport:
        """Upload ``snapshot`` only if the remote still holds ``fetched``'s version.

        Raises SnapshotConflict when another machine pushed in between (the engine
        then fetches, merges and tries again). Returns a report whose ``version`` is
        the remote snapshot's new version. The default calls ``push`` unconditionally.
        """
        return self.push(snapshot)

    def purge(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        """Remove the memories ``memory_ids`` from every snapshot the remote keeps.

        Called by ``smriti purge`` (``smriti.engine.purge``) right after a sync pushed a
        snapshot without them, so only older snapshots still hold them: a provider
        rewrites each one with ``smriti.portable.scrub.scrub`` (the git provider
        rewrites this user's file in every commit of the branch and force-pushes with a
        lease; the S3 provider replaces the object and deletes its older versions).
        Other users' files on a shared remote are left as they are. Returns a
        JSON-ready summary including a ``warning`` about copies it cannot reach (other
        clones, a server's unreachable objects). Raises BackupError when the remote
        cannot be rewritten. The default raises BackupError: this provider keeps no
        history it knows how to rewrite.
        """
        raise BackupError(
            f"the {self.name} backup provider cannot remove memories from the snapshots it "
            f"keeps at {self.location()}; the current snapshot no longer holds them, but "
            "remove older copies by hand"
        )

    def close(self) -> None:  # noqa: B027 - optional hook for subclasses
        """Release clients."""
