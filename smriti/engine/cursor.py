"""Opaque cursors of ``list`` mode: where the previous page ended, for whom, how filtered.

A cursor is URL-safe base64 of a small JSON object: the listing key of the page's last
memory (``smriti.backend.ListKey``), the user it was made for, and a digest of the filters.
It grants nothing (every read is scoped to the caller's own memory anyway); the user and
digest only turn a cursor used in the wrong place into a clear error instead of a page
that silently starts somewhere odd.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import datetime

from smriti.backend import Listing, ListKey
from smriti.errors import InvalidInput

VERSION = 1
MAX_CURSOR_CHARS = 1024


def digest(listing: Listing) -> str:
    """A short hash of the filters of ``listing`` (not its limit or position)."""
    parts = [
        listing.memory_type or "",
        ",".join(listing.tags),
        "all" if listing.all_tags else "any",
        listing.since.isoformat() if listing.since else "",
        listing.until.isoformat() if listing.until else "",
        "1" if listing.include_superseded else "0",
    ]
    if listing.origin is not None:  # only then: cursors made before origins stay valid
        parts.append("origin=" + listing.origin)
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def encode(key: ListKey, user: str, listing: Listing) -> str:
    """The cursor continuing ``listing`` for ``user`` after ``key``."""
    accessed, created, engram_id = key
    body = {
        "v": VERSION,
        "u": user,
        "f": digest(listing),
        "k": [accessed.isoformat(), created.isoformat(), engram_id],
    }
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: object, user: str, listing: Listing) -> ListKey | None:
    """The key a cursor continues after; None for no cursor. InvalidInput when it is
    malformed, another user's, or made with other filters."""
    if cursor is None or (isinstance(cursor, str) and not cursor.strip()):
        return None
    bad = InvalidInput(
        "cursor is not valid: pass the next_cursor of the previous list call unchanged"
    )
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        raise bad
    text = cursor.strip()
    try:
        body = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        accessed, created, engram_id = body["k"]
        key = (datetime.fromisoformat(accessed), datetime.fromisoformat(created), str(engram_id))
        version, owner, filters = body["v"], body["u"], body["f"]
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if version != VERSION or key[0].tzinfo is None or key[1].tzinfo is None:
        raise bad
    if owner != user:
        raise InvalidInput("this cursor belongs to another user's listing; start without one")
    if filters != digest(listing):
        raise InvalidInput(
            "this cursor was made for other filters (memory_type, tags, tag_match, since, "
            "until, include_superseded, origin); use the same ones as the call that returned it"
        )
    return key
