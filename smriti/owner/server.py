"""The owner process: the one process that opens a store, serving every other
``smriti`` process of the same user over a Unix socket.

Life of an owner: take the store's owner lock (an ``flock``, released by the kernel
however the process ends, so a crash leaves nothing stale), remove a socket left by a
dead owner, open the engine, listen (socket mode 0600; each peer's uid checked), say
``ready`` to the process that started it, and serve requests concurrently in a thread
pool. It stops on SIGTERM/SIGINT, on ``shutdown`` from a client, once no process
has been attached for ``SMRITI_OWNER_IDLE`` seconds, or when its backend says a fresh
open would recover the store (``needs_reopen``, after a full disk got room again): it
stops listening first (so new processes start the next owner, which waits for the
lock), answers the requests it has, closes the engine (final backup included) and
exits.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, suppress
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from smriti import __version__, requests
from smriti.errors import BackendError, Cancelled, SmritiError
from smriti.logs import get_logger
from smriti.owner import ops, protocol
from smriti.owner.paths import OwnerPaths
from smriti.private import open_private, private_dir
from smriti.progress import Progress
from smriti.requests import RecallRequest

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.engine import Engine

log = get_logger(__name__)

#: How long a new owner waits for the previous one to let go of the store.
LOCK_WAIT_SECONDS = 120.0
#: How often a stopping owner says it still waits for requests under way.
WAIT_LOG_SECONDS = 10.0
#: Requests run at once (reads run in parallel where the backend allows).
WORKERS = 16
#: Recalls run at once. Recall is CPU-bound (its vector scans already use every core),
#: so more at a time than there are cores only adds contention: measured on 2 cores,
#: 16 unbounded streams made 0.68 times the recalls per second of one.
RECALL_SLOTS = max(2, os.cpu_count() or 2)
#: Progress relayed to a client at most this often.
PROGRESS_SECONDS = 0.2
#: Warnings kept to hand to processes that attach later, and for how long: a process
#: attaching hours later should not be told of an old failed backup push.
NOTICES_KEPT = 20
NOTICE_SECONDS = 600.0


class _Client:
    """One attached process."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.send_lock = threading.Lock()
        self.pid = 0
        self.kind = "unknown"
        self.since = datetime.now(UTC)
        self.requests = 0
        #: The sequence number of the last warning handed to this process.
        self.seen = 0
        #: Set when the process disconnects: its long operations stop (``Cancelled``).
        self.gone = threading.Event()

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; a client that left is ignored."""
        data = protocol.encode(message)
        with self.send_lock, suppress(OSError):
            self.sock.sendall(data)

    def describe(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "kind": self.kind,
            "since": self.since.isoformat(timespec="seconds"),
            "requests": self.requests,
        }


class _RelayProgress(Progress):
    """A Progress whose calls are sent to the client that asked for the operation, and
    that stops the operation (``Cancelled``) once that client has gone: a killed
    ``smriti import`` must not go on writing into the store with nobody to tell."""

    def __init__(
        self,
        send: Callable[[dict[str, Any]], None],
        label: str,
        total: int | None,
        gone: threading.Event | None = None,
    ):
        super().__init__(label, total, enabled=False)
        self._send = send
        self._gone = gone
        self._unsent = 0
        self._sent_at = 0.0
        send({"start": [label, total]})

    def checkpoint(self) -> None:
        if self._gone is not None and self._gone.is_set():
            raise Cancelled(f"{self.label}: stopped, the process that asked for it has left")

    def set_label(self, label: str, total: int | None = None) -> None:
        self._flush()  # no checkpoint: a new phase may begin with work on another thread
        self._send({"label": [label, total]})

    def advance(self, n: int = 1) -> None:
        self.checkpoint()
        self._unsent += n
        if time.monotonic() - self._sent_at >= PROGRESS_SECONDS:
            self._flush()

    def _flush(self) -> None:
        if self._unsent:
            self._send({"advance": self._unsent})
            self._unsent = 0
        self._sent_at = time.monotonic()

    def close(self) -> None:
        self._flush()
        self._send({"close": True})


class OwnerServer:
    """Serve one store to the user's other processes (see the module docstring)."""

    def __init__(self, settings: Settings, idle_seconds: float | None = None) -> None:
        self.settings = settings
        self.paths = OwnerPaths.for_store(settings.user_dir())
        self.idle_seconds = settings.owner_idle if idle_seconds is None else idle_seconds
        self.started = datetime.now(UTC)
        self.engine: Engine | None = None
        self.stop = threading.Event()
        #: The signal that asked this owner to stop, if one did.
        self._signal: int | None = None
        self._lock = threading.Condition()
        self._clients: dict[int, _Client] = {}
        self._inflight = 0
        self._served = 0
        self._last_activity = time.monotonic()
        self._closing = False
        self._listener: socket.socket | None = None
        self._unknown_peers_noted = False
        self._lock_fd: int | None = None
        #: (number, when, record) of the warnings kept.
        self._notices: deque[tuple[int, float, dict[str, Any]]] = deque(maxlen=NOTICES_KEPT)
        self._notice_numbers = itertools.count(1)
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="smriti-owner")
        self._recall_slots = threading.BoundedSemaphore(RECALL_SLOTS)

    # -- life ----------------------------------------------------------------------------
    def run(self, ready: Callable[[str], None]) -> int:
        """Become the owner, serve until told to stop, close; the exit code.

        ``ready`` receives ``"ready"`` once listening, or ``"error {json}"`` when the
        store cannot be opened (then the error is raised too).
        """
        from smriti.engine import Engine
        from smriti.owner.spawn import fingerprint

        try:
            self._take_lock()
            self._remove_stale_socket()
            self.engine = Engine.from_settings(self.settings).open()
            self._fingerprint = fingerprint(self.settings)
            self._listen()
        except BaseException as exc:
            ready("error " + json.dumps(protocol.error_payload(exc)))
            if self.engine is not None:
                self.engine.close()
            self._release()
            raise
        self._write_info()
        previous = self._handle_signals()
        ready("ready")
        log.info("owner serving", socket=str(self.paths.socket), pid=os.getpid())
        self.engine.start_background()
        threading.Thread(target=self._accept_loop, name="smriti-owner-accept", daemon=True).start()
        threading.Thread(target=self._idle_loop, name="smriti-owner-idle", daemon=True).start()
        try:
            while not self.stop.wait(0.5):
                pass
            if self._signal is not None:
                log.info("signal received; stopping", signal=signal.Signals(self._signal).name)
        finally:
            self._shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def _take_lock(self) -> None:
        private_dir(self.paths.dir)
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise BackendError(
                        f"another Smriti owner process holds {self.paths.lock} and has not "
                        f"let go for {LOCK_WAIT_SECONDS:.0f} s; see {self.paths.log}"
                    ) from None
                time.sleep(0.05)
        self._lock_fd = fd

    def _remove_stale_socket(self) -> None:
        """We hold the lock, so a socket file left there is a dead owner's."""
        try:
            os.unlink(self.paths.socket)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise BackendError(
                f"cannot replace {self.paths.socket} (left by an earlier owner?): "
                f"{exc.strerror or exc}; remove it"
            ) from None

    def _listen(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # created 0600: no other user may connect
        try:
            sock.bind(os.fspath(self.paths.socket))
            os.chmod(self.paths.socket, 0o600)
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise BackendError(
                f"the owner process cannot listen on {self.paths.socket}: {exc.strerror or exc}"
            ) from None
        finally:
            os.umask(old)
        self._listener = sock

    def _write_info(self) -> None:
        info = {
            "pid": os.getpid(),
            "started_at": self.started.isoformat(timespec="seconds"),
            "socket": os.fspath(self.paths.socket),
            "version": __version__,
        }
        partial = self.paths.info.with_suffix(".json.tmp")
        with open_private(partial, "w", encoding="utf-8") as out:
            out.write(json.dumps(info))
        os.replace(partial, self.paths.info)

    def _handle_signals(self) -> dict[int, Any]:
        def note(signum: int, frame: object) -> None:
            # No logging here: the handler runs between two bytecodes of the main thread,
            # which may hold the log writer's lock, and would wait for it forever.
            self._signal = signum
            self.stop.set()

        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, note) for sig in (signal.SIGTERM, signal.SIGINT)}

    def _stop_listening(self) -> None:
        """New processes then start (and wait for) the next owner instead."""
        with self._lock:
            self._closing = True
            listener, self._listener = self._listener, None
        if listener is not None:
            with suppress(FileNotFoundError):
                os.unlink(self.paths.socket)
            listener.close()

    def _shutdown(self) -> None:
        self._stop_listening()
        with self._lock:
            # Every request under way finishes first (a re-embedding may take minutes):
            # closing the store under a running write would fail it halfway.
            while not self._lock.wait_for(lambda: self._inflight == 0, timeout=WAIT_LOG_SECONDS):
                log.info("owner stopping; waiting for requests under way", left=self._inflight)
            clients = list(self._clients.values())
        for client in clients:
            with suppress(OSError):
                client.sock.shutdown(socket.SHUT_RDWR)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.engine is not None:
            log.info("owner closing the store")
            self.engine.stop_background()
            self.engine.close()
        with suppress(FileNotFoundError):
            os.unlink(self.paths.info)
        self._release()
        log.info("owner stopped")

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _idle_loop(self) -> None:
        """Stop when idle long enough, or when the store must be opened afresh."""
        step = min(1.0, self.idle_seconds / 4) if self.idle_seconds > 0 else 1.0
        while not self.stop.wait(step):
            with self._lock:
                idle = not self._clients and not self._inflight
                quiet = time.monotonic() - self._last_activity
            if self.idle_seconds > 0 and idle and quiet >= self.idle_seconds:
                log.info("no process attached; owner stopping", idle_s=round(quiet, 1))
                self.stop.set()
                return
            if self._must_reopen():
                self.stop.set()
                return

    def _must_reopen(self) -> bool:
        """Whether the backend asks for a fresh open; then the owner stops listening, so
        that requests (this one included, refused unexecuted) go to a new owner."""
        if self.engine is None or not self.engine.backend.needs_reopen():
            return False
        log.warning("the store can be opened afresh; owner making way for a new one")
        self._stop_listening()
        return True

    # -- warnings for the processes served -------------------------------------------------
    def notice(self, event: dict[str, Any]) -> None:
        """Keep a warning or error the owner logged, for the processes it serves: their
        users (a CLI in a terminal, an MCP client's log) would never see the owner's log.
        The same warning is kept once, as recent as its last occurrence."""
        record = {k: v for k, v in event.items() if k not in ("timestamp", "logger")}
        now = time.monotonic()
        with self._lock:
            for n, (number, _, kept) in enumerate(self._notices):
                if kept == record:
                    self._notices[n] = (number, now, kept)
                    return
            self._notices.append((next(self._notice_numbers), now, record))

    def _answer(self, client: _Client, message: dict[str, Any]) -> None:
        """Send an answer with the warnings this process has not been handed yet."""
        with self._lock:
            since = time.monotonic() - NOTICE_SECONDS
            fresh = [(n, r) for n, at, r in self._notices if n > client.seen and at > since]
            if fresh:
                client.seen = fresh[-1][0]
        if fresh:
            message["notices"] = [r for _, r in fresh]
        client.send(message)

    # -- serving -------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while True:
            listener = self._listener
            if listener is None:
                return
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # closed by _stop_listening
            uid = protocol.peer_uid(sock)
            if uid is None and not self._unknown_peers_noted:
                # Only where the system cannot say; the socket's mode 0600 still keeps
                # other users out.
                log.info("the connecting process's uid cannot be read here")
                self._unknown_peers_noted = True
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from another user", peer_uid=uid)
                sock.close()
                continue
            threading.Thread(
                target=self._serve_client, args=(sock,), name="smriti-owner-client", daemon=True
            ).start()

    def _serve_client(self, sock: socket.socket) -> None:
        client = _Client(sock)
        with self._lock:
            self._clients[id(client)] = client
            self._last_activity = time.monotonic()
        try:
            reader = sock.makefile("rb")
            while line := reader.readline(protocol.MAX_LINE_BYTES):
                message = protocol.decode(line)
                if message is not None:
                    self._handle(client, message)
        except OSError:
            pass
        finally:
            client.gone.set()
            with self._lock:
                self._clients.pop(id(client), None)
                self._last_activity = time.monotonic()
            with suppress(OSError):
                sock.close()

    def _handle(self, client: _Client, message: dict[str, Any]) -> None:
        key, op = message.get("id"), message.get("op")
        args = message.get("args") if isinstance(message.get("args"), dict) else {}
        if op == "hello":
            client.pid = int(args.get("pid") or 0)
            client.kind = str(args.get("kind") or "unknown")[:80]
            self._answer(client, {"id": key, "result": self._hello()})
        elif op == "status":
            client.send({"id": key, "result": self.status()})
        elif op == "shutdown":
            log.info("asked to stop", by_pid=client.pid, by=client.kind)
            self._stop_listening()
            client.send({"id": key, "result": {"stopping": True}})
            self.stop.set()
        else:
            if self._must_reopen():
                self.stop.set()
            with self._lock:
                if self._closing:
                    refused = BackendError("the owner process is stopping")
                    client.send({"id": key, "error": protocol.error_payload(refused, False)})
                    return
                self._inflight += 1
                client.requests += 1
            self._pool.submit(self._run, client, key, str(op), args, bool(message.get("progress")))

    def _run(self, client: _Client, key: Any, op: str, args: dict[str, Any], relay: bool) -> None:
        def send_progress(event: dict[str, Any]) -> None:
            if relay:
                client.send({"id": key, "progress": event})

        def factory(label: str, total: int | None) -> Progress:
            return _RelayProgress(send_progress, label, total, client.gone)

        try:
            assert self.engine is not None
            # The request is checked here as at any edge: the socket carries JSON.
            request = requests.decode(op, args, self.engine.settings)
            with self._recall_slots if op == RecallRequest.op else nullcontext():
                result = ops.run(self.engine, request, factory)
            self._answer(client, {"id": key, "result": result})
        except Cancelled as exc:
            log.warning("operation stopped: its process left", op=op, by_pid=client.pid)
            self._answer(client, {"id": key, "error": protocol.error_payload(exc)})
        except SmritiError as exc:
            self._answer(client, {"id": key, "error": protocol.error_payload(exc)})
        except Exception:
            log.exception("request failed unexpectedly", op=op)
            failure = SmritiError(
                f"Smriti hit an internal error during {op}; the owner log "
                f"({self.paths.log}) has the details"
            )
            self._answer(client, {"id": key, "error": protocol.error_payload(failure)})
        finally:
            with self._lock:
                self._inflight -= 1
                self._served += 1
                self._last_activity = time.monotonic()
                self._lock.notify_all()

    def _hello(self) -> dict[str, Any]:
        with self._lock:
            others = len(self._clients) - 1
        return {
            "pid": os.getpid(),
            "version": __version__,
            "protocol": protocol.PROTOCOL,
            "fingerprint": self._fingerprint,
            "others": max(0, others),
        }

    def status(self) -> dict[str, Any]:
        """Who owns the store and who is attached."""
        with self._lock:
            clients = [c.describe() for c in self._clients.values()]
            inflight, served = self._inflight, self._served
        assert self.engine is not None
        return {
            "pid": os.getpid(),
            "started_at": self.started.isoformat(timespec="seconds"),
            "uptime_s": round((datetime.now(UTC) - self.started).total_seconds(), 1),
            "version": __version__,
            "socket": os.fspath(self.paths.socket),
            "log": os.fspath(self.paths.log),
            "user": self.engine.user,
            "backend": self.engine.backend.name,
            "idle_stop_s": self.idle_seconds,
            "in_flight": inflight,
            "served": served,
            "clients": clients,
        }
