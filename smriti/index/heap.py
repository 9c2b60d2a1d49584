"""Giving freed memory back to the system after the working set's large transient jobs.

glibc keeps memory freed below the top of its heap for later allocations, so after
loading a working set (JSON parsing, arrays built and dropped), saving one or running a
consolidation, a process held on to tens of MB it no longer used: 83 MB after saving a
100,000-memory working set, 33 MB after loading one. ``malloc_trim(0)`` returns the
free pages; elsewhere (macOS, Windows, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import cache
from typing import Any


@cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release() -> bool:
    """Return the C heap's free pages to the system; True when glibc did."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))
