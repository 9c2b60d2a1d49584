"""MCP progress notifications for long tool calls (consolidate, sync).

Engine work runs in a worker thread (``run_engine``), or in the store's owner process,
whose progress arrives on the owner connection's reader thread. ``McpProgress`` turns
the ``smriti.progress`` calls made there into ``Context.report_progress`` on the event
loop (``anyio.from_thread.run`` with the loop's token), so the client that sent a
progress token sees the operation move; without a token the SDK sends nothing.

MCP wants each notification's progress to grow, so the value counts the items done
over every phase of the operation plus one per phase begun (a new phase moves it on
even before an item is done); the message names the phase
(``consolidating: writing 1,200/8,000``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio.from_thread
import anyio.lowlevel

from smriti.logs import get_logger
from smriti.progress import Progress

log = get_logger(__name__)

#: At most one notification per phase this often (phase changes always go out).
NOTIFY_SECONDS = 0.25


class McpProgress:
    """A progress factory (``smriti.progress.ProgressArg``) for one tool call.

    Build it in the tool's coroutine (it captures the running event loop), pass it as
    ``progress`` to the operation.
    """

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.token = anyio.lowlevel.current_token()
        self.finished = 0  # phases begun, and the items done in those already over
        self.sent = -1.0
        self.failed = False
        self._lock = threading.Lock()

    def __call__(self, label: str, total: int | None) -> Progress:
        """A Progress whose updates become notifications."""
        return _Phase(self, label, total)

    def notify(self, progress: float, message: str) -> None:
        """Send one notification from a thread that is not the event loop's; a client
        that went away only stops the notifications, never the operation."""
        with self._lock:
            if self.failed or progress <= self.sent:
                return
            self.sent = progress
            try:
                anyio.from_thread.run(
                    self.ctx.report_progress, progress, None, message, token=self.token
                )
            except Exception as exc:
                self.failed = True
                log.debug("progress notification failed; no more are sent", error=str(exc))


class _Phase(Progress):
    """One phase of an operation, reported through its ``McpProgress``."""

    def __init__(self, relay: McpProgress, label: str, total: int | None) -> None:
        super().__init__(label, total, enabled=False)
        self.relay = relay
        self._last = 0.0
        relay.finished += 1
        self._send(force=True)

    def set_label(self, label: str, total: int | None = None) -> None:
        self.relay.finished += self.done + 1
        self.done = 0
        self.label, self.total = label, total
        self._send(force=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._send()

    def close(self) -> None:
        self._send(force=True)
        self.relay.finished += self.done
        self.done = 0

    def _send(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < NOTIFY_SECONDS:
            return
        self._last = now
        count = f"{self.done:,}/{self.total:,}" if self.total else f"{self.done:,}"
        self.relay.notify(float(self.relay.finished + self.done), f"{self.label} {count}")
