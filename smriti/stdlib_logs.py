"""The standard-library loggers of the libraries Smriti runs on (the MCP SDK, uvicorn,
sse-starlette, httpx), sent to stderr beside Smriti's own structlog lines, with
nothing secret in them at any level.

At ``debug`` those libraries log what passes through them: sse-starlette every
response chunk (memory content included), the SDK the messages it routes and the
text of errors, which can quote what a caller sent. Smriti promises that memory
content, tokens and keys never reach a log, so every record of theirs goes through
``Redact`` first:

- sse-starlette's ``chunk`` and ``ping`` lines (payload and nothing else) are dropped;
- a record's arguments are kept only when they are numbers or names that cannot carry
  a caller's data (MCP method names, tool names, hex session ids); any other argument
  is replaced by ``<redacted>``;
- a message built before logging (an f-string, no arguments) keeps its words but not
  what follows its first ``": "``, and any word that looks like data (digits, mixed
  case, punctuation, long) is replaced;
- a traceback keeps its frames (file, line, function) but not the exception's text.

``configure_stdlib_logging`` installs this on the root logger before the SDK is
imported into a server, so the SDK's own ``basicConfig`` (a rich console handler at
the server's level) finds a handler and adds none.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from datetime import UTC, datetime
from typing import Any

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
REDACTED = "<redacted>"
#: Arguments safe to show: MCP method names, tool names, hex ids (sessions, requests),
#: IP addresses and URL schemes (uvicorn's "running on" line).
_SAFE_TEXT = re.compile(
    r"(?:[0-9a-f]{32}|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|initialize|ping"
    r"|https?|localhost|\d{1,3}(?:\.\d{1,3}){3}|[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}"
    r"|(?:notifications|tools|resources|prompts|completion|logging|sampling|roots"
    r"|elicitation|tasks|subscriptions)/[A-Za-z_/]{1,40}|smriti_[a-z_]{1,30})"
)
#: Words of a pre-built message that cannot be data: plain words, short acronyms,
#: small numbers, hex ids; with the punctuation of a sentence around them.
_SAFE_WORD = re.compile(
    r"[(\[\"']?(?:[A-Za-z][a-z]{0,19}|[A-Z]{2,5}|\d{1,6}|[0-9a-f]{32}|-+)[)\]\"'.,;:!?]*"
)
#: Debug lines of sse-starlette that are nothing but the payload.
_PAYLOAD_LINES = ("chunk: %s", "ping: %s")


class Redact(logging.Filter):
    """Strip data from records of other libraries (see the module doc)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record`` in place; False drops it."""
        if record.name.startswith("smriti"):
            return True
        if record.name.startswith("sse_starlette") and record.msg in _PAYLOAD_LINES:
            return False
        if record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            record.args = tuple(_safe_arg(a) for a in args)
            record.msg = str(record.msg)
        else:
            record.msg = scrub(str(record.msg))
        if record.exc_info and record.exc_info[0] is not None:
            record.exc_text = _frames_only(record.exc_info)
            record.exc_info = None
        return True


def _safe_arg(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and _SAFE_TEXT.fullmatch(value):
        return value
    return REDACTED


def scrub(text: str) -> str:
    """A pre-built message without what may be data (see the module doc)."""
    head, sep, _ = text.partition(": ")
    words = [w if _SAFE_WORD.fullmatch(w) else REDACTED for w in head.split()]
    return " ".join(words) + (f": {REDACTED}" if sep else "")


def _frames_only(exc_info: Any) -> str:
    kind, _, tb = exc_info
    frames = traceback.format_list(traceback.extract_tb(tb))
    return "Traceback (most recent call last):\n" + "".join(frames) + f"{kind.__name__}: {REDACTED}"


class _JsonLines(logging.Formatter):
    """A record as one JSON line shaped like Smriti's structlog lines."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "event": record.getMessage(),
            "logger": record.name,
            "level": record.levelname.lower(),
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
        }
        if record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


def configure_stdlib_logging(level: str = "info", json_lines: bool | None = None) -> None:
    """Send the standard-library loggers to stderr at ``level`` through ``Redact``."""
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(Redact())
    handler.setFormatter(
        _JsonLines() if json_lines else logging.Formatter("%(levelname)-8s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(_LEVELS.get(level, logging.INFO))
