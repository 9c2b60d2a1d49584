"""A dependency-free progress line on stderr, shown only on a terminal.

Long operations (export, import, re-embedding) report ``advance(n)`` calls; the line is
redrawn at most a few times a second as ``label  12,345/20,000  61%  4,210/s``. When
stderr is not a terminal (logs, pipes, MCP stdio servers) nothing is written.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

REDRAW_SECONDS = 0.2


class Progress:
    """One progress line; use as a context manager or call ``close``.

    ``enabled=None`` means "only when ``stream`` is a terminal". ``total`` may be None
    (unknown) or updated later through ``set_total``.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        enabled: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.label = label
        self.total = total
        self.done = 0
        self._started = time.perf_counter()
        self._drawn = 0.0
        self._width = 0

    def set_label(self, label: str, total: int | None = None) -> None:
        """Switch to a new phase (e.g. from engrams to edges)."""
        self.label = label
        self.total = total
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more items done and redraw when it is time."""
        self.done += n
        self._draw()

    def checkpoint(self) -> None:
        """A long operation calls this where it may stop (between batches). Here it does
        nothing; the owner process's Progress raises ``Cancelled`` there once the
        process that asked for the operation has left."""

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._drawn < REDRAW_SECONDS:
            return
        self._drawn = now
        rate = self.done / max(now - self._started, 1e-9)
        if self.total:
            pct = min(100, int(100 * self.done / self.total))
            text = f"{self.label}  {self.done:,}/{self.total:,}  {pct:3d}%  {rate:,.0f}/s"
        else:
            text = f"{self.label}  {self.done:,}  {rate:,.0f}/s"
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        if not self.enabled:
            return
        self._draw(force=True)
        self.stream.write("\n")
        self.stream.flush()
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: What long operations accept as ``progress``: None (a line only on a terminal), a
#: bool (always / never), or a factory ``(label, total) -> Progress`` (the owner
#: process passes one that relays the progress to the client that asked).
ProgressArg = bool | None | Callable[[str, int | None], Progress]


def progress_bar(progress: ProgressArg, label: str, total: int | None = None) -> Progress:
    """The Progress for ``progress`` as long operations accept it."""
    if callable(progress):
        return progress(label, total)
    return Progress(label, total, enabled=progress)
