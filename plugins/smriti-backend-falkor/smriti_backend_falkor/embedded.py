"""Embedded FalkorDB (``DB_TYPE=falkordblite``): no server to run.

Starts FalkorDB from the ``falkordblite`` package (``pip install falkordblite``, Python
3.12+) with its data under ``{STORAGE_LOCATION}/{user}/falkordb/`` and talks to it over
a Unix socket with the same code as the server backend. The append-only file is on
(fsync every second), so memories survive a crash of the process. Several processes
opening the same directory share one server (falkordblite keeps a registry); the last
one to close shuts it down.

Every Smriti process of a user reaches the store through one owner process
(``single_process``, as for Kùzu), so that process is its only writer and the engine
keeps the user's working set in memory (``sole_writer``, ``smriti.index``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from smriti import get_logger
from smriti.backend import BackendError, private_dir
from smriti_backend_falkor.backend import FalkorBackend
from smriti_backend_falkor.connection import connect

if TYPE_CHECKING:
    from smriti.backend import BackendOptions

log = get_logger(__name__)


class FalkorLiteBackend(FalkorBackend):
    """FalkorDB embedded in the process's package (falkordblite), one store per user."""

    name: ClassVar[str] = "falkordblite"
    aliases: ClassVar[tuple[str, ...]] = ("falkordb-embedded",)
    description: ClassVar[str] = "embedded FalkorDB (falkordblite) under STORAGE_LOCATION"
    multi_tenant: ClassVar[bool] = False
    single_process: ClassVar[bool] = True
    sole_writer = True
    #: The embedded server reads none of the FALKOR_* settings.
    declared_settings = ()

    def __init__(self, user: str, directory: Path) -> None:
        super().__init__(user, addr=f"embedded FalkorDB in {directory}", graph="smriti")
        self.multi_tenant = False  # type: ignore[misc]
        self.directory = directory
        self._server: Any = None

    @classmethod
    def from_options(cls, options: BackendOptions) -> FalkorLiteBackend:
        """The store in ``{STORAGE_LOCATION}/{user}/falkordb`` (user name validated)."""
        return cls(options.user, options.user_dir / "falkordb")

    def open(self) -> None:
        """Start (or join) the embedded server, then open like the server backend."""
        if self._client is not None:
            return
        self._server = self._start_server()
        try:
            super().open()
        except BaseException:
            self._stop_server()
            raise

    def _connect(self) -> Any:
        return connect(self.addr, "", self._server.client.socket_file)

    def _start_server(self) -> Any:
        try:
            from redislite.falkordb_client import FalkorDB as EmbeddedFalkorDB
        except ImportError as exc:
            raise BackendError(
                "DB_TYPE=falkordblite needs the falkordblite package: pip install falkordblite"
            ) from exc
        private_dir(self.directory)
        config = {"appendonly": "yes", "appendfsync": "everysec", "port": "0"}
        try:
            return EmbeddedFalkorDB(str(self.directory / "smriti.rdb"), serverconfig=config)
        except Exception as exc:
            raise BackendError(f"could not start {self.addr}: {exc}") from exc

    def close(self) -> None:
        """Close the client first (or the server keeps running), then the server."""
        super().close()
        self._stop_server()

    def _stop_server(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            try:
                server.close()
            except Exception as exc:  # shutting down must not mask the caller's error
                log.warning("falkordblite_close_failed", error=str(exc))
