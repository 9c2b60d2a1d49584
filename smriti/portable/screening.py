"""Secrets in an imported file, handled as a store handles them (``smriti.secrets``).

An export written before SMRITI_SECRETS existed, or by a store that allowed secrets,
may hold credentials. Importing it applies the importing store's policy: ``redact``
rewrites each memory's content, summary, tags and source (and re-embeds the memory
when an embedder is at hand, so that no vector was computed from the secret) and
leaves out cues whose names hold one; ``refuse`` reads the whole file first and
imports nothing if any record holds a secret; ``allow`` imports it as it is.
``<private>`` text is removed in every mode; a memory that held nothing else is left
out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smriti import secrets
from smriti.errors import InvalidInput
from smriti.model import Cue, Engram
from smriti.portable.format import open_text

if TYPE_CHECKING:
    from smriti.embedding import Embedder

#: Line numbers named in a refusal (the file may hold many more).
MAX_NAMED_LINES = 5


def refuse_if_secrets(path: Path) -> None:
    """InvalidInput naming the kinds and first lines when any memory or cue record of
    the file at ``path`` holds a secret; reads the whole file, writes nothing."""
    kinds: list[str] = []
    lines: list[int] = []
    with open_text(path, "r") as f:
        for lineno, line in enumerate(f, start=1):
            found = _record_kinds(line)
            if found:
                kinds += found
                lines.append(lineno)
    if kinds:
        shown = ", ".join(map(str, lines[:MAX_NAMED_LINES])) + (", ..." if len(lines) > 5 else "")
        raise InvalidInput(secrets.refusal(kinds, f"s on line(s) {shown} of {path}"))


def _record_kinds(line: str) -> list[str]:
    if '"engram"' not in line and '"cue"' not in line:
        return []
    try:
        record: dict[str, Any] = json.loads(line)
    except ValueError:
        return []  # the import proper reports a malformed line
    if record.get("kind") == "engram":
        texts = [record.get("content"), record.get("summary"), record.get("source")]
        texts += list(record.get("tags") or [])
        return [f.kind for t in texts if isinstance(t, str) for f in secrets.find(t)]
    if record.get("kind") == "cue" and isinstance(record.get("name"), str):
        return [f.kind for f in secrets.find(record["name"], ignore_case=True)]
    return []


class ImportScreen:
    """Applies the policy to each engram and cue of an import (``_Loader`` calls it)."""

    def __init__(self, mode: str, embedder: Embedder | None) -> None:
        self.mode = mode
        self.embedder = embedder
        #: Ids of cues left out (their links and co-occurrences go too).
        self.dropped_cues: set[str] = set()
        #: What was removed, by kind (``secrets.summary`` of it goes to the log).
        self.kinds: list[str] = []
        #: The secrets found in engrams, lower-cased: a cue name cut from one (a
        #: password, found only by its URL or ``password:`` context) goes too.
        self.spans: set[str] = set()

    def engram(self, e: Engram) -> Engram | None:
        """``e`` with its secrets handled; None when only private text was in it."""
        if not secrets.strip_private(e.content)[0].strip():
            self.kinds.append(secrets.PRIVATE)
            return None
        done = secrets.screen(self.mode, e.content, e.tags, e.source)
        if self.mode != "allow":
            for text in (e.content, e.summary, e.source, *e.tags):
                self.spans.update(text[f.start : f.end].lower() for f in secrets.find(text))
        summary, hid = secrets.strip_private(e.summary)
        kinds = [*done.kinds, *[secrets.PRIVATE] * hid]
        if self.mode != "allow":
            summary, found = secrets.redact(summary)
            kinds += [f.kind for f in found]
        if not kinds:
            return e
        self.kinds += kinds
        out = e.with_changes(content=done.text, summary=summary or done.text[:1000],
                             tags=done.tags, source=done.source)  # fmt: skip
        if self.embedder is not None:  # no vector computed from the secret is kept
            vector = self.embedder.embed([out.content])[0]
            out.embedding = np.asarray(vector, dtype=np.float32)
        return out

    def keeps_cue(self, cue: Cue) -> bool:
        """False (and the cue is remembered as dropped) when its name holds a secret or
        is cut from one the file's memories held."""
        if self.mode == "allow" or not self._secret_name(cue.name):
            return True
        self.dropped_cues.add(cue.id)
        self.kinds.append("cue")
        return False

    def _secret_name(self, name: str) -> bool:
        if secrets.find(name, ignore_case=True):
            return True
        # A fragment long or odd enough not to be a word that happens to occur in one.
        fragment = len(name) >= 8 or any(c.isdigit() for c in name)
        return fragment and len(name) >= 4 and any(name in span for span in self.spans)
