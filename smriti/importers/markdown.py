"""Plain Markdown and text files (``--from markdown``): one memory per paragraph.

``path`` is a ``.md``/``.markdown``/``.txt`` file or a folder of them (searched
recursively, hidden folders such as ``.git`` and ``.obsidian`` skipped). A paragraph is
a run of lines between blank lines; a fenced code block stays whole. A leading YAML
frontmatter block is skipped. Headings are not memories of their own: the nearest
heading above a paragraph and the file's name become its tags (so its cues). Each
memory is dated by its file's modification time.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from smriti.errors import InvalidInput
from smriti.importers.records import Imported, Rejected

SUFFIXES = (".md", ".markdown", ".txt")
EXPECTED = "a .md, .markdown or .txt file, or a folder holding some"


def read(path: Path) -> Iterator[Imported | Rejected]:
    """The paragraphs of the file or folder at ``path`` as memories."""
    files = _files(path)
    root = path if path.is_dir() else path.parent
    for file in files:
        where = file.relative_to(root).as_posix()
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
            yield Rejected(where, reason)
            continue
        when = datetime.fromtimestamp(file.stat().st_mtime, UTC)
        for n, (heading, paragraph) in enumerate(paragraphs(text)):
            tags = (file.stem, heading) if heading else (file.stem,)
            yield Imported(f"{where}#{n}", paragraph, tags=tags, occurred_at=when)


def _files(path: Path) -> list[Path]:
    """The files to read; InvalidInput when there are none."""
    if path.is_file():
        if path.suffix.lower() not in SUFFIXES:
            raise InvalidInput(f"{path} is not Markdown or text; markdown reads {EXPECTED}")
        return [path]
    if not path.is_dir():
        raise InvalidInput(f"{path} does not exist; markdown reads {EXPECTED}")
    found = sorted(
        p
        for p in path.rglob("*")
        if p.is_file()
        and p.suffix.lower() in SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    if not found:
        raise InvalidInput(f"{path} holds no Markdown or text files; markdown reads {EXPECTED}")
    return found


def paragraphs(text: str) -> Iterator[tuple[str, str]]:
    """``(nearest heading, paragraph)`` for each paragraph of ``text``."""
    heading, block, fenced = "", [], False
    for line in _body(text).splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and stripped.startswith("#") and stripped.lstrip("#").startswith(" "):
            yield from _flush(heading, block)
            block, heading = [], stripped.lstrip("#").strip()
        elif not fenced and not stripped:
            yield from _flush(heading, block)
            block = []
        else:
            block.append(line.rstrip())
    yield from _flush(heading, block)


def _flush(heading: str, block: list[str]) -> Iterator[tuple[str, str]]:
    paragraph = "\n".join(block).strip()
    if paragraph:
        yield heading, paragraph


def _body(text: str) -> str:
    """``text`` without a leading YAML frontmatter block."""
    if not text.startswith("---\n"):
        return text
    end = text.find("\n---", 4)
    return text if end < 0 else text[end + 4 :]
