"""Reader for a basic-memory project: a folder of Markdown notes (or one note).

Followed: basic-memory's own parser, ``src/basic_memory/markdown/plugins.py`` and
``entity_parser.py`` (the 0.18 series). A note is YAML frontmatter (``title``, ``type``,
``tags``, ``permalink``, ``created``, ``modified``) and a body whose list items are:

- observations ``- [category] text #tag (context)`` (or a list item with a ``#tag``);
- explicit relations ``- relation_type [[Target]] (context)`` (a relation type with spaces
  is quoted); a ``[[WikiLink]]`` anywhere else is a ``links_to`` relation.

What becomes what: each note is one memory (its title and prose: the body without the
observation and relation lines), tagged with its tags and type, its title and type as
cues, linked to its relations' targets with their relation type. Each observation is one
memory of its own, tagged with its category and ``#tags``, its note's title as a cue,
linked to its note (``observation_of``). A note's ``created`` (else the file's time) is
``occurred_at`` for it and its observations. Targets resolve by title or permalink, as
basic-memory resolves them. Lines inside code fences and block quotes are prose, as
there. Files under hidden folders (``.basic-memory``, ``.obsidian``, ``.git``) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from smriti.errors import InvalidInput
from smriti.importers.records import Imported, Rejected

__all__ = ["read"]

EXPECTED = "a basic-memory project: a folder of Markdown (.md) notes, or one .md note"
OBSERVATION_OF = "observation_of"
LINKS_TO = "links_to"

_LIST_ITEM = re.compile(r"^\s*[-*+]\s+(.+)$")
_CATEGORY = re.compile(r"^\[([^\[\]()]+)\]\s+(.+)$")
_CLOCK = re.compile(r"^\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?$")
_WIKILINK = re.compile(r"\[\[([^\[\]]+?)\]\]")
_SECTION = re.compile(r"^#{1,6}\s+(observations|relations)\s*$", re.IGNORECASE)


@dataclass
class _Note:
    """One parsed note before its links are resolved against the whole project."""

    where: str
    title: str
    kind: str
    tags: list[str]
    aliases: list[str]
    when: datetime
    prose: str
    observations: list[tuple[str, list[str]]] = field(default_factory=list)
    relations: list[tuple[str, str]] = field(default_factory=list)  # (target, type)


def read(path: Path) -> Iterator[Imported | Rejected]:
    """The notes and observations of a basic-memory folder or of one note file."""
    files, root = _files(path)
    notes: list[_Note] = []
    for file in files:
        where = str(file.relative_to(root)) if root else file.name
        try:
            notes.append(_note(file, where))
        except ValueError as error:
            yield Rejected(where, str(error))
    names = {alias: _key(note) for note in notes for alias in note.aliases}
    for note in notes:
        yield from _records(note, names)


def _files(path: Path) -> tuple[list[Path], Path | None]:
    if path.is_file():
        if path.suffix.lower() != ".md":
            raise InvalidInput(f"{path} is not a .md file; expected {EXPECTED}")
        return [path], None
    if not path.is_dir():
        raise InvalidInput(f"{path} does not exist; expected {EXPECTED}")
    files = [
        f
        for f in sorted(path.rglob("*.md"))
        if not any(part.startswith(".") for part in f.relative_to(path).parts)
    ]
    if not files:
        raise InvalidInput(f"{path} holds no .md notes; expected {EXPECTED}")
    return files, path


def _note(file: Path, where: str) -> _Note:
    """Raises ValueError (with the reason) for a note basic-memory would not index."""
    try:
        text = file.read_text(encoding="utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as error:
        raise ValueError("not UTF-8 text") from error
    meta, body = _frontmatter(text)
    title = _string(meta.get("title")) or file.stem
    stat_time = datetime.fromtimestamp(file.stat().st_mtime, tz=UTC)
    note = _Note(
        where=where,
        title=title,
        kind=_string(meta.get("type")) or "note",
        tags=_tags(meta.get("tags")),
        aliases=[a.casefold() for a in (title, _string(meta.get("permalink")), file.stem) if a],
        when=_moment(meta.get("created"), "created") or stat_time,
        prose="",
    )
    note.prose = _body(body, note)
    return note


def _body(body: str, note: _Note) -> str:
    """Fills the note's observations and relations; returns the prose left over."""
    prose: list[str] = []
    fenced = False
    for line in body.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        item = None if fenced or line.lstrip().startswith(">") else _LIST_ITEM.match(line)
        if item and _take(item.group(1).strip(), note):
            continue
        if not fenced:
            note.relations.extend((t, LINKS_TO) for t in _WIKILINK.findall(line))
        if not _SECTION.match(line.strip()):
            prose.append(line.rstrip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(prose)).strip()


def _take(content: str, note: _Note) -> bool:
    """Whether a list item is a relation or an observation (recorded on the note)."""
    relation = _relation(content)
    if relation is not None:
        note.relations.append(relation)
        return True
    if content.startswith(("[ ]", "[x]", "[-]")) or re.match(r"^\[.*?\]\(.*?\)$", content):
        return False  # a task or a Markdown link, not an observation
    match = _CATEGORY.match(content)
    category = match.group(1).strip() if match else None
    if category is not None and (_CLOCK.match(category) or _task_marker(category)):
        match, category = None, None
    tags = [t for part in content.split() if part.startswith("#") for t in part.split("#") if t]
    if match is None and not tags:
        return False
    text = match.group(2).strip() if match else content
    note.relations.extend((t, LINKS_TO) for t in _WIKILINK.findall(text))
    note.observations.append((text, [c for c in (category, *tags) if c]))
    return True


def _relation(content: str) -> tuple[str, str] | None:
    """``type [[Target]] (context)`` as (target, type), as basic-memory reads it."""
    label, bracket, rest = content.partition("[[")
    label = label.strip()
    if not bracket or not label:
        return None
    if label[0] in "'\"" and label.endswith(label[0]) and len(label) > 1:
        label = label[1:-1].strip()
    elif any(c.isspace() for c in label):
        return None  # prose that happens to hold a link
    target, closed, after = rest.partition("]]")
    after = after.strip()
    if not closed or not target.strip() or not label:
        return None
    if after and not (after.startswith("(") and after.endswith(")") and after.count("(") == 1):
        return None
    return target.strip(), label


def _task_marker(category: str) -> bool:
    return len(category) == 1 and (category in "xX" or not category.isalnum())


def _records(note: _Note, names: dict[str, str]) -> Iterator[Imported]:
    key = _key(note)
    cues = tuple(dict.fromkeys((note.title, note.kind)))
    links = tuple(
        dict.fromkeys(
            (names.get(target.casefold(), f"note:{target.casefold()}"), kind)
            for target, kind in note.relations
        )
    )
    prose = (
        note.prose
        if note.prose.lstrip("# ").startswith(note.title)
        else (f"{note.title}\n\n{note.prose}".strip())
    )
    yield Imported(
        key, prose, tuple(dict.fromkeys([*note.tags, note.kind])), note.when, None, cues, links
    )
    for number, (text, tags) in enumerate(note.observations, 1):
        yield Imported(
            f"{key}#observation{number}",
            text,
            tags=tuple(dict.fromkeys(tags)),
            occurred_at=note.when,
            cues=(note.title,),
            links=((key, OBSERVATION_OF),),
        )


def _key(note: _Note) -> str:
    return f"note:{note.title.casefold()}"


def _frontmatter(text: str) -> tuple[dict[str, object], str]:
    """The YAML frontmatter basic-memory writes (scalars and lists of scalars), and the body.

    A full YAML parser is not a dependency of Smriti; basic-memory's frontmatter holds
    only ``key: value`` lines, ``[a, b]`` lists and ``- item`` lists, which this reads.
    """
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, text
    meta: dict[str, object] = {}
    key = None
    for line in lines[1:end]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") and key is not None and isinstance(meta.get(key), list):
            meta[key].append(_scalar(stripped[2:]))  # type: ignore[union-attr]
        elif ":" in line and not line[0].isspace():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            meta[key] = _scalar(value) if value else []
    return meta, "\n".join(lines[end + 1 :])


def _scalar(value: str) -> object:
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        return [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
    if len(value) > 1 and value[0] in "'\"" and value[-1] == value[0]:
        return value[1:-1]
    return value


def _string(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value).strip() if value else ""


def _tags(value: object) -> list[str]:
    items = value if isinstance(value, list) else str(value or "").split(",")
    return list(dict.fromkeys(str(t).strip().lstrip("#") for t in items if str(t).strip("# ")))


def _moment(value: object, name: str) -> datetime | None:
    """A frontmatter time; a naive one is local wall-clock time, as basic-memory reads it."""
    if value in (None, "", []):
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as error:
        raise ValueError(f"frontmatter {name} {value!r} is not an ISO 8601 date or time") from error
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.astimezone(UTC)
