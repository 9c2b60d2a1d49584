"""Importers: read memories from other memory tools' files and store them through the engine.

Each format has a reader ``read(path) -> Iterator[Imported | Rejected]`` registered in
``READERS`` under its ``smriti import --from`` name. Readers are pure: they only parse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from smriti.importers.records import Imported, Rejected

__all__ = ["READERS", "Imported", "Reader", "Rejected"]

Reader = Callable[[Path], Iterator[Imported | Rejected]]

# One line per format: the name `smriti import --from` takes, and its reader.
READERS: dict[str, Reader] = {}

from smriti.importers import markdown, mcp_memory  # noqa: E402

READERS["mcp-memory"] = mcp_memory.read
READERS["markdown"] = markdown.read

# The readers of part B's formats (imported here, after READERS, so each module stays pure).
from smriti.importers import basic_memory, claude_code, mcp_memory_service, mem0  # noqa: E402

READERS["claude-code"] = claude_code.read
READERS["basic-memory"] = basic_memory.read
READERS["mem0"] = mem0.read
READERS["mcp-memory-service"] = mcp_memory_service.read
