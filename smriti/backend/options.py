"""``BackendOptions``: what the engine tells a storage backend it builds.

The engine decides; the backend does not ask. A backend reads its user, the user's
directory, whether a working set will answer reads in front of it, and the values of
the settings it declares (``StorageBackend.declared_settings``) from here, never from
the core's ``Settings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from smriti.setting import Setting, read_all

if TYPE_CHECKING:
    from smriti.backend.contract import StorageBackend
    from smriti.config import Settings

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """The options of one backend instance.

    ``user`` is the user name the instance serves (canonical when the engine builds
    it); ``user_dir`` the user's directory under ``STORAGE_LOCATION`` (where an
    embedded backend keeps its files; a server backend may ignore it);
    ``working_set`` whether the engine answers recall reads from a working set in
    memory in front of the backend (``smriti.index``), so the backend need not build
    native vector or full-text indexes; ``settings`` the validated values of the
    backend's declared settings, by variable (``get`` reads one).
    """

    user: str
    user_dir: Path
    working_set: bool = False
    settings: Mapping[str, Any] = field(default_factory=dict)

    def get(self, setting: Setting[T]) -> T:
        """The value of one declared setting (its default when it was not passed)."""
        if setting.env in self.settings:
            return self.settings[setting.env]  # type: ignore[no-any-return]
        return setting.default

    @classmethod
    def from_settings(
        cls, backend: type[StorageBackend], settings: Settings, user: str
    ) -> BackendOptions:
        """The options the engine passes ``backend`` for ``user`` under ``settings``:
        the user as given (the engine gives the canonical spelling) and its directory,
        its declared settings read (and validated) from the settings' environment, and
        a working set when ``Settings.working_set_for`` says so."""
        return cls(
            user=user,
            user_dir=settings.user_dir(user),
            working_set=settings.working_set_for(backend.sole_writer),
            settings=read_all(backend.declared_settings, settings.env),
        )
