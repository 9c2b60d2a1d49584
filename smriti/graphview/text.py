"""Text as every picture format can carry it."""

from __future__ import annotations

import re

#: Characters XML 1.0 forbids (C0 controls but tab, newline and return; surrogates;
#: U+FFFE and U+FFFF): a memory may contain them, an SVG or GraphML file may not.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """``text`` without the characters XML cannot hold (each becomes U+FFFD)."""
    return _NOT_XML.sub("\ufffd", text)
