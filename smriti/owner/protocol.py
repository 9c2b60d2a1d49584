"""The wire between a Smriti process and its store's owner: JSON Lines over a socket.

Each message is one UTF-8 JSON object on one line. A client first sends ``hello``;
then any number of requests ``{"id": n, "op": name, "args": {...}}``, which the owner
runs concurrently and answers in any order with ``{"id": n, "result": ...}`` or
``{"id": n, "error": {"type": ..., "message": ..., "executed": bool}}``, after
``{"id": n, "progress": {...}}`` messages for long operations. ``executed: false``
promises that nothing of the request was done (the owner was stopping), so it may be
sent again whatever it is. A final line without its newline is ignored, so a client
that dies while writing never gets half a request run.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
from typing import Any

from smriti import errors

#: The protocol generation; owner and client must agree (a mismatch after an upgrade
#: makes the client ask the old owner to stop).
PROTOCOL = 1
#: Longest line accepted: a memory may be 10**7 characters, JSON-escaped.
MAX_LINE_BYTES = 64 * 1024 * 1024


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line."""
    return (json.dumps(message, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def decode(line: bytes) -> dict[str, Any] | None:
    """The message in ``line``, or None for a partial or malformed one."""
    if not line.endswith(b"\n"):
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def error_payload(exc: BaseException, executed: bool = True) -> dict[str, Any]:
    """How an exception travels: its Smriti error class name and message."""
    kind = type(exc).__name__ if isinstance(exc, errors.SmritiError) else "InternalError"
    return {"type": kind, "message": str(exc), "executed": executed}


def error_from(payload: dict[str, Any]) -> errors.SmritiError:
    """The exception a client raises for an error payload: the same Smriti error class
    (a plain SmritiError for an unknown name)."""
    cls = getattr(errors, str(payload.get("type", "")), None)
    message = str(payload.get("message", "")) or "the Smriti owner process failed"
    if isinstance(cls, type) and issubclass(cls, errors.SmritiError):
        return cls(message)
    return errors.SmritiError(message)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None if unknown)."""
    try:
        return _peer_uid(sock)
    except (OSError, struct.error):
        return None


def _peer_uid(sock: socket.socket) -> int | None:
    if sys.platform.startswith("linux"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    getpeereid = getattr(socket.socket, "getpeereid", None)  # not in CPython; BSD fallback
    if getpeereid is not None:
        return int(getpeereid(sock)[0])
    local_peercred = getattr(socket, "LOCAL_PEERCRED", None)
    if local_peercred is not None:  # macOS: struct xucred {u_int version; uid_t uid; ...}
        creds = sock.getsockopt(0, local_peercred, struct.calcsize("2I"))
        return struct.unpack("2I", creds)[1]
    return None
