"""Reaching a store's owner process: connect, start it when none runs, and carry on
when it dies.

A request whose answer was lost because the owner died is sent again to the next
owner when repeating it is harmless (``ops.REPEATABLE``; a store carries the id the
client chose for the new memory, so the next owner finds it if the first one wrote
it); any other is a clear error saying it may have been partly done. A request the
owner refused while stopping (``executed: false``) is always sent again.
"""

from __future__ import annotations

import dataclasses
import errno
import itertools
import os
import socket
import threading
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from smriti import __version__
from smriti.errors import BackendError, SmritiError
from smriti.logs import get_logger
from smriti.model import new_id
from smriti.owner import ops, protocol, spawn
from smriti.owner.paths import OwnerPaths
from smriti.owner.service import Service
from smriti.progress import Progress, ProgressArg, progress_bar
from smriti.requests import Request, StoreRequest

if TYPE_CHECKING:
    from collections.abc import Callable

    from smriti.config import Settings

log = get_logger(__name__)

#: How often one request may meet a dead or stopping owner before giving up.
MAX_ATTEMPTS = 10
#: How often a client tries to start an owner that dies before it is ready.
START_ATTEMPTS = 4
#: How long a startup error is given again without starting another owner.
START_RETRY_SECONDS = 2.0


class _NotExecuted(Exception):
    """The request was not run (not sent whole, or refused by a stopping owner)."""


class _OwnerLost(Exception):
    """The connection ended while the request was in flight."""


class _Pending:
    def __init__(self, progress: ProgressArg) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: dict[str, Any] | None = None
        self.lost = False
        self.progress = progress
        self.bar: Progress | None = None

    def on_progress(self, event: dict[str, Any]) -> None:
        """Mirror the owner's progress calls on a local Progress."""
        if "start" in event:
            label, total = event["start"]
            self.bar = progress_bar(self.progress, str(label), total)
        elif self.bar is None:
            return
        elif "label" in event:
            self.bar.set_label(str(event["label"][0]), event["label"][1])
        elif "advance" in event:
            self.bar.advance(int(event["advance"]))
        elif "close" in event:
            self.bar.close()
            self.bar = None

    def finish(self) -> None:
        if self.bar is not None:  # the owner went away before closing it
            self.bar.close()
            self.bar = None
        self.done.set()


class Connection:
    """One socket to the owner; requests from many threads share it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reader = sock.makefile("rb")
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self.closed = False
        threading.Thread(target=self._read_loop, name="smriti-owner-reader", daemon=True).start()

    def request(self, op: str, args: dict[str, Any], progress: ProgressArg = None) -> Any:
        """Send one request and wait for its answer."""
        pending = _Pending(progress)
        with self._lock:
            if self.closed:
                raise _NotExecuted
            key = next(self._ids)
            self._pending[key] = pending
        message = {"id": key, "op": op, "args": args, "progress": progress is not False}
        try:
            with self._send_lock:
                self.sock.sendall(protocol.encode(message))
        except OSError:
            with self._lock:
                self._pending.pop(key, None)
            raise _NotExecuted from None  # a line without its end is never run
        pending.done.wait()
        if pending.lost:
            raise _OwnerLost
        if pending.error is not None:
            if pending.error.get("executed") is False:
                raise _NotExecuted
            raise protocol.error_from(pending.error)
        return pending.result

    def _read_loop(self) -> None:
        try:
            while line := self._reader.readline(protocol.MAX_LINE_BYTES):
                message = protocol.decode(line)
                if message is not None:
                    self._dispatch(message)
        except OSError:
            pass
        finally:
            with self._lock:
                self.closed = True
                left, self._pending = self._pending, {}
            for pending in left.values():
                pending.lost = True
                pending.finish()

    def _dispatch(self, message: dict[str, Any]) -> None:
        with self._lock:
            pending = self._pending.get(message.get("id"))  # type: ignore[arg-type]
            if pending is not None and "progress" not in message:
                del self._pending[message["id"]]
        for notice in message.get("notices") or ():
            _log_notice(notice)
        if pending is None:
            return
        if "progress" in message:
            pending.on_progress(message["progress"])
            return
        pending.result = message.get("result")
        pending.error = message.get("error")
        pending.finish()

    def close(self) -> None:
        """Leave the owner (it notices at once)."""
        with self._lock:
            self.closed = True
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _shutdown(conn: Connection) -> None:
    """Ask the owner to stop; it stops listening before it answers, and an owner that
    went away meanwhile has done what was asked."""
    with suppress(_NotExecuted, _OwnerLost):
        conn.request("shutdown", {})


def _log_notice(notice: dict[str, Any]) -> None:
    """Log a warning the owner logged, here, as if this process had."""
    fields = {k: v for k, v in notice.items() if k not in ("event", "level")}
    level = "error" if notice.get("level") == "error" else "warning"
    getattr(log, level)(str(notice.get("event", "")), **fields, logged_by="owner")


def try_connect(paths: OwnerPaths) -> socket.socket | None:
    """A socket connected to the running owner, or None when none is listening."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(paths.socket))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
            return None
        if exc.errno == errno.EACCES:
            raise BackendError(
                f"permission denied on the owner socket {paths.socket}: it belongs to "
                "another user; each user needs their own STORAGE_LOCATION"
            ) from None
        raise BackendError(f"cannot reach the owner socket {paths.socket}: {exc}") from None
    return sock


class RemoteService(Service):
    """The memory of a store whose owner is another process."""

    remote = True

    def __init__(self, settings: Settings, kind: str) -> None:
        self.settings = settings
        self.user = settings.accessing_user
        self.kind = kind
        self.paths = OwnerPaths.for_store(settings.user_dir())
        self.fingerprint = spawn.fingerprint(settings)
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._handed_over = False
        self._warned = False
        #: Whether this service may start an owner (a look at a running one may not).
        self._may_start = True
        #: When an owner last failed to start, and its error.
        self._start_failure: tuple[float, dict[str, Any]] | None = None
        self.owner: dict[str, Any] = {}

    @classmethod
    def connect(cls, settings: Settings, kind: str) -> RemoteService:
        """Attach to the owner now (starting one), so that errors show at startup."""
        service = cls(settings, kind)
        service._connection()
        log.info(
            "memory reached through the store's owner process",
            owner_pid=service.owner.get("pid"),
            socket=str(service.paths.socket),
        )
        return service

    @classmethod
    def attach_soon(
        cls,
        settings: Settings,
        kind: str,
        wait: float,
        meanwhile: Callable[[], object] | None = None,
    ) -> RemoteService:
        """Attach in the background, waiting at most ``wait`` seconds: a server can then
        answer its client while the owner still opens a large store. An error within
        ``wait`` is raised; a later one is logged, and each call until the owner is
        reached tries again (and waits for the attempt under way). ``meanwhile`` is
        called once the attempt has started, before the wait."""
        service = cls(settings, kind)
        done = threading.Event()
        failed: list[BaseException] = []

        def attach() -> None:
            try:
                service._connection()
                log.info(
                    "memory reached through the store's owner process",
                    owner_pid=service.owner.get("pid"),
                )
            except Exception as exc:
                failed.append(exc)
                log.error("the store could not be reached; calls will try again", error=str(exc))
            finally:
                done.set()

        threading.Thread(target=attach, name="smriti-attach", daemon=True).start()
        if meanwhile is not None:
            meanwhile()
        if done.wait(wait) and failed:
            raise failed[0]
        if not done.is_set():
            log.info("serving while the owner process opens the store; calls wait for it")
        return service

    @classmethod
    def existing(cls, settings: Settings, kind: str) -> RemoteService | None:
        """Attached to the owner if one is running (never starting one), else None."""
        service = cls(settings, kind)
        service._handed_over = True  # a look at the owner must not restart it
        service._may_start = False
        sock = try_connect(service.paths)
        if sock is None:
            return None
        conn = service._greet(sock)
        if conn is None:
            return None
        service._conn = conn
        return service

    def send(self, request: Request, progress: ProgressArg) -> Any:
        """Run ``request`` in the owner, through its deaths (see the module docstring).

        A store without an id gets one here: the same id on every attempt, so it is
        stored once."""
        if isinstance(request, StoreRequest) and request.memory_id is None:
            request = dataclasses.replace(request, memory_id=new_id())
        repeatable = type(request) in ops.REPEATABLE
        return self._request(request.op, request.to_wire(), progress, repeatable)

    def _request(
        self, op: str, args: dict[str, Any], progress: ProgressArg, repeatable: bool
    ) -> Any:
        """Send ``op`` with its wire ``args``; sent again to the next owner when the
        owner died before answering and ``repeatable`` says that is harmless."""
        for _ in range(MAX_ATTEMPTS):
            conn = self._connection()
            try:
                return conn.request(op, args, progress)
            except _NotExecuted:
                self._drop(conn)
            except _OwnerLost:
                self._drop(conn)
                if not repeatable:
                    raise SmritiError(
                        f"the Smriti owner process stopped while running {op}; it may "
                        f"have been partly done: check, then run it again (log: "
                        f"{self.paths.log})"
                    ) from None
                log.warning("owner process lost; sending the request again", op=op)
                args = {**args, "repeated": True}
        raise BackendError(f"the Smriti owner process keeps stopping; see {self.paths.log}")

    def owner_status(self) -> dict[str, Any] | None:
        """The owner's pid, start time and attached processes."""
        return dict(self._request("status", {}, None, repeatable=True))

    def stop_owner(self) -> None:
        """Ask the owner to stop (it answers what it has first)."""
        with self._lock:
            conn = self._conn
        if conn is not None:
            _shutdown(conn)

    def close(self) -> None:
        """Detach from the owner (which stays for other processes, or until idle)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- connecting ----------------------------------------------------------------------
    def _drop(self, conn: Connection) -> None:
        with self._lock:
            if self._conn is conn:
                self._conn = None
        conn.close()

    def _connection(self) -> Connection:
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = self._open()
            return self._conn

    def _open(self) -> Connection:
        for _ in range(MAX_ATTEMPTS):
            conn = self._attach()
            if conn is not None:
                return conn
        raise BackendError(f"could not attach to the Smriti owner process; see {self.paths.log}")

    def _attach(self) -> Connection | None:
        """One try: connect, or start an owner; None when it should be tried again."""
        sock = try_connect(self.paths)
        if sock is None and not self._may_start:
            raise BackendError("the Smriti owner process has stopped")
        if sock is None:
            with spawn.start_lock(self.paths):
                sock = try_connect(self.paths)  # another process may have started one
                if sock is None:
                    self._start_owner()
                    return None
        return self._greet(sock)

    def _greet(self, sock: socket.socket) -> Connection | None:
        """Say hello on a new connection; None if the owner went away meanwhile or was
        asked to make way for one with this process's settings."""
        conn = Connection(sock)
        try:
            hello = conn.request("hello", self._hello())
        except (_NotExecuted, _OwnerLost):
            conn.close()
            time.sleep(0.05)
            return None
        if self._should_hand_over(hello):
            _shutdown(conn)
            conn.close()
            self._handed_over = True
            return None
        self.owner = hello
        return conn

    def _hello(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "kind": self.kind,
            "version": __version__,
            "protocol": protocol.PROTOCOL,
            "fingerprint": self.fingerprint,
        }

    def _should_hand_over(self, hello: dict[str, Any]) -> bool:
        """Whether to ask the owner to stop so that one with this process's settings
        (or version) starts: only when no other process is attached to it."""
        speaks = hello.get("protocol") == protocol.PROTOCOL
        differences = spawn.differences(hello.get("fingerprint") or {}, self.fingerprint)
        if hello.get("version") != __version__:
            differences.append("the Smriti version")  # an upgrade: its owner runs the old code
        if speaks and not differences:
            return False
        if not hello.get("others") and not self._handed_over:
            log.info("restarting the owner with this process's settings", changed=differences)
            return True
        if not speaks:
            raise BackendError(
                f"the Smriti owner process (pid {hello.get('pid')}) runs version "
                f"{hello.get('version')}, which this version cannot talk to, and serves other "
                "processes; restart them, or run `smriti owner stop`"
            )
        if not self._warned:
            self._warned = True
            log.warning(
                "the running owner process was started with other settings; it keeps "
                "them while other processes use it (`smriti owner stop` restarts it)",
                owner_pid=hello.get("pid"),
                differences=differences,
            )
        return False

    def _start_owner(self) -> None:
        """Start an owner and wait until it is ready (or raise its startup error).

        An owner that just failed to start (a broken setting, a damaged store) fails
        the calls of the next ``START_RETRY_SECONDS`` with the same error instead of
        starting an owner for each of them."""
        failed = self._start_failure
        if failed is not None and time.monotonic() - failed[0] < START_RETRY_SECONDS:
            raise protocol.error_from(failed[1])
        for _ in range(START_ATTEMPTS):
            state, detail = spawn.start_owner(self.settings, self.paths)
            if state == "ready":
                self._start_failure = None
                return
            if state == "error":
                self._start_failure = (time.monotonic(), detail)
                raise protocol.error_from(detail)
            log.warning("the owner process died while starting; starting another")
        raise BackendError(f"the Smriti owner process does not start; see {self.paths.log}")
