"""Tidying a memory: groups of near-duplicates, stale memories, and merging.

The store never merges two memories that say different things (only an exact repeat,
``smriti.engine.duplicates``), so close look-alikes accumulate: a fact restated, a
conversation stored twice in other words. ``duplicates`` finds them without a new
vector search, from the associations the store already made: a ``near_duplicate`` edge,
or a ``semantic`` one at or above the threshold (stores made before near-duplicate
edges existed). It also lists stale memories: never recalled since they were stored,
long ago.

``merge`` folds memories into one survivor that the user (or agent) chooses. Nothing is
deleted: each merged memory is marked superseded by the survivor, as a correction marks
an old version, so recall leaves it out while ``get`` and ``history`` still show it.
The survivor keeps its id and its own version chain, and takes over what the merged
ones had: their cues, their associations to current memories, their tags, the highest
importance and the sum of their recalls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from smriti import validation
from smriti.backend import Expand
from smriti.engine import duplicates
from smriti.engine.contiguity import FOLLOWS
from smriti.engine.versions import MERGED, RELATED_MAX, VERSION_RELATIONS, fetch, memory_out
from smriti.errors import InvalidInput
from smriti.model import Association, Engram, EngramUpdate, Link, utcnow

if TYPE_CHECKING:
    from smriti.engine.core import Engine

#: The association relation of a possible conflict (``smriti.engine.store``).
CONFLICTS = "conflicts"
#: Memories merged in one call, at most.
MERGE_MAX = 50
DEFAULT_GROUPS = 20
MAX_GROUPS = 200
#: A memory never recalled for this many days is stale.
STALE_DAYS = 30
STALE_SHOWN = 20


def duplicates_report(
    engine: Engine, threshold: object = None, limit: object = None, stale_days: object = None
) -> dict[str, Any]:
    """Groups of current memories that closely resemble each other, largest first, and
    the memories never recalled in ``stale_days`` (oldest first).

    ``threshold`` (cosine, default ``DEDUP_THRESHOLD`` or 0.9 when that is off) is the
    similarity at or above which two memories belong to one group.
    """
    bar = _threshold(engine, threshold)
    count = validation.limit(DEFAULT_GROUPS if limit is None else limit, MAX_GROUPS)
    days = _days(stale_days)
    groups = _groups(_close_pairs(engine, bar))
    members = {m for g in groups for m in g[0]}
    engrams = {e.id: e for e in _engrams(engine, members) if not e.is_superseded}
    shown: list[dict[str, Any]] = []
    for ids, best in groups:
        alive = sorted((engrams[i] for i in ids if i in engrams), key=_newest_first)
        if len(alive) > 1:
            shown.append({"similarity": round(best, 4), "memories": [_brief(e) for e in alive]})
    shown.sort(key=lambda g: (-len(g["memories"]), -g["similarity"], g["memories"][0]["id"]))
    return {
        "threshold": bar,
        "groups": shown[:count],
        "more_groups": max(0, len(shown) - count),
        "stale_days": days,
        "stale": _stale(engine, days),
    }


def conflicts_report(engine: Engine, limit: object = None) -> dict[str, Any]:
    """Groups of current memories linked as possible conflicts (a memory stored while a
    close one said something else about the same thing, ``smriti.engine.duplicates``),
    largest first, newest memory first in each: one of them is probably out of date."""
    count = validation.limit(DEFAULT_GROUPS if limit is None else limit, MAX_GROUPS)
    pairs = [
        (a.source_id, a.target_id, a.strength)
        for a in engine.backend.iter_associations()
        if a.relation_type == CONFLICTS and a.source_id != a.target_id
    ]
    groups = _groups(pairs)
    engrams = {e.id: e for e in _engrams(engine, {m for g in groups for m in g[0]})}
    shown: list[dict[str, Any]] = []
    for ids, best in groups:
        alive = sorted((engrams[i] for i in ids if i in engrams), key=_newest_first)
        alive = [e for e in alive if not e.is_superseded]
        if len(alive) > 1:
            shown.append({"similarity": round(best, 4), "memories": [_brief(e) for e in alive]})
    shown.sort(key=lambda g: (-len(g["memories"]), -g["similarity"], g["memories"][0]["id"]))
    return {"groups": shown[:count], "more_groups": max(0, len(shown) - count)}


def merge(engine: Engine, memory_id: object, others: object) -> dict[str, Any]:
    """Fold the memories ``others`` into ``memory_id`` (the survivor); see the module
    docstring. A merge repeated with the same memories returns the same answer."""
    survivor = fetch(engine, memory_id, "merge into")
    ids = _other_ids(others, survivor.id)
    merged = [fetch(engine, i, "merge") for i in ids]
    if survivor.is_superseded:
        raise InvalidInput(
            f"memory {survivor.id} is superseded by {survivor.superseded_by}: merge into "
            "a current memory"
        )
    for e in merged:
        if e.is_superseded and e.superseded_by != survivor.id:
            raise InvalidInput(
                f"memory {e.id} is already superseded by {e.superseded_by}; merge that one"
            )
    todo = [e for e in merged if not e.is_superseded]
    with engine.writes.shared():
        if todo:
            _fold(engine, survivor, todo)
        engine.dirty.set()
    now_survivor = fetch(engine, survivor.id, "merge into")
    return {"memory": memory_out(now_survivor), "merged": ids}


def _fold(engine: Engine, survivor: Engram, todo: list[Engram]) -> None:
    now = utcnow()
    every = [survivor.id, *(e.id for e in todo)]
    around = engine.backend.neighbourhood(Expand(every, RELATED_MAX, 0, 0))
    gone = {e.id for e in todo}
    have_cues = {link.cue_id for link in around.links if link.engram_id == survivor.id}
    links: dict[str, Link] = {}
    for link in around.links:
        if link.engram_id in gone and link.cue_id not in have_cues:
            best = links.get(link.cue_id)
            if best is None or best.strength < link.strength:
                links[link.cue_id] = Link(survivor.id, link.cue_id, link.strength)
    edges = _carried(engine, survivor.id, gone, around.associations, now)
    edges += [Association(survivor.id, e.id, 1.0, MERGED, now) for e in todo]
    engine.backend.import_records([], [], list(links.values()), edges, [])
    everyone = [survivor, *todo]
    tags = list(dict.fromkeys(t for e in everyone for t in e.tags))
    engine.backend.update_engrams(
        [
            EngramUpdate(
                survivor.id,
                importance=max(e.importance for e in everyone),
                tags=tags if tags != survivor.tags else None,
                access_count=sum(e.access_count for e in everyone),
                last_accessed_at=max(e.last_accessed_at for e in everyone),
                decay_factor=max(e.decay_factor for e in everyone),
            ),
            *(EngramUpdate(e.id, superseded_by=survivor.id, superseded_at=now) for e in todo),
        ]
    )


def _carried(
    engine: Engine, survivor: str, gone: set[str], edges: Sequence[Association], now: Any
) -> list[Association]:
    """The merged memories' associations to current memories the survivor is not yet
    linked to, as edges from the survivor (the strongest per other memory)."""
    linked = {a.target_id if a.source_id == survivor else a.source_id
              for a in edges if survivor in (a.source_id, a.target_id)}  # fmt: skip
    offered: dict[str, Association] = {}
    for a in edges:
        if a.relation_type in (*VERSION_RELATIONS, FOLLOWS):
            continue
        here, other = (
            (a.source_id, a.target_id) if a.source_id in gone else (a.target_id, a.source_id)
        )
        if here not in gone or other in gone or other == survivor or other in linked:
            continue
        if other not in offered or offered[other].strength < a.strength:
            offered[other] = Association(survivor, other, a.strength, a.relation_type, now)
    current = {e.id for e in _engrams(engine, offered) if not e.is_superseded}
    return [a for other, a in offered.items() if other in current]


def _close_pairs(engine: Engine, bar: float) -> list[tuple[str, str, float]]:
    close = (duplicates.NEAR_DUPLICATE, "semantic")
    return [
        (a.source_id, a.target_id, a.strength)
        for a in engine.backend.iter_associations()
        if a.relation_type in close and a.strength >= bar and a.source_id != a.target_id
    ]


def _groups(pairs: list[tuple[str, str, float]]) -> list[tuple[list[str], float]]:
    """Connected groups of the pairs (union-find), each with its closest pair's cosine."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, _ in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    members: dict[str, list[str]] = {}
    best: dict[str, float] = {}
    for x in parent:
        members.setdefault(root(x), []).append(x)
    for a, _, sim in pairs:
        r = root(a)
        best[r] = max(best.get(r, 0.0), sim)
    return [(sorted(ids), best[r]) for r, ids in members.items()]


def _stale(engine: Engine, days: int) -> list[dict[str, Any]]:
    cutoff = utcnow() - timedelta(days=days)
    old = [
        s
        for s in engine.backend.engram_stats()
        if s.access_count == 0 and s.last_accessed_at < cutoff
    ]
    old.sort(key=lambda s: (s.last_accessed_at, s.id))
    # Superseded memories are left out: their newer versions may well be recalled.
    looked = [s.id for s in old[: STALE_SHOWN * 4]]
    found = {e.id: e for e in _engrams(engine, looked) if not e.is_superseded}
    return [_brief(found[i]) for i in looked if i in found][:STALE_SHOWN]


def _brief(e: Engram) -> dict[str, Any]:
    return {
        "id": e.id,
        "summary": e.summary,
        "created_at": e.created_at.isoformat(),
        "access_count": e.access_count,
        "importance": e.importance,
    }


def _newest_first(e: Engram) -> tuple[float, str]:
    return (-e.created_at.timestamp(), e.id)


def _engrams(engine: Engine, ids: Iterable[str]) -> list[Engram]:
    wanted = list(ids)
    return engine.backend.get_engrams(wanted, embeddings=False) if wanted else []


def _threshold(engine: Engine, value: object) -> float:
    if value is None:
        setting = engine.settings.dedup_threshold
        return 0.9 if setting is None else setting
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput("threshold must be a number between 0.5 and 1")
    try:
        bar = float(value)
    except ValueError:
        raise InvalidInput(f"threshold must be a number between 0.5 and 1, got {value!r}") from None
    if not 0.5 <= bar <= 1.0:
        raise InvalidInput(f"threshold must be between 0.5 and 1, got {bar}")
    return bar


def _days(value: object) -> int:
    if value is None:
        return STALE_DAYS
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("stale_days must be a whole number of days (0 or more)")
    if not 0 <= value <= 36500:
        raise InvalidInput(f"stale_days must be between 0 and 36500, got {value}")
    return value


def _other_ids(value: object, survivor: str) -> list[str]:
    """The ids to merge: a list of ids or one comma-separated string."""
    raw = value.split(",") if isinstance(value, str) else value
    if not isinstance(raw, list | tuple) or not raw:
        raise InvalidInput("give the ids of the memories to merge into memory_id (memory_ids)")
    ids = list(dict.fromkeys(validation.memory_id(str(i).strip(), "merge") for i in raw))
    if survivor in ids:
        raise InvalidInput(f"memory {survivor} cannot be merged into itself")
    if len(ids) > MERGE_MAX:
        raise InvalidInput(f"merge at most {MERGE_MAX} memories at once, got {len(ids)}")
    return ids
