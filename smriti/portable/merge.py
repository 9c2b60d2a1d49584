"""Merging a snapshot into a store: union by id, the newer version wins, forgets honoured.

Backups from several machines meet in one remote snapshot; before a machine pushes, it
merges the remote snapshot into its store with these rules, each commutative,
associative and idempotent, so machines that sync in any order end with the same graph
(equal ``canonical_hash``):

- **Memories**: the union by id. A memory present on both sides with different
  properties keeps the version with the larger ``(last_accessed_at, access_count,
  engram_digest)``: the one used last, then the one used more, then a fixed tie-break
  on the content of every property, so every machine picks the same one. Every
  mutable property (importance, tags set by ``update``, decay, cluster) comes with the
  winning version: an edit that touched no access time wins only on the tie-break.
- **Versions**: supersession is sticky and resolved apart from the rest of the
  properties. A memory superseded on either side is superseded in the merge. When the
  two sides name different successors (two machines corrected the same memory before
  syncing), the earlier ``superseded_at`` wins (ties: the smaller successor id); both
  successors are kept, as the separate memories they are, each still naming the old one
  in its ``supersedes`` (which is set when a memory is stored and never conflicts), so
  the memory has two current versions until someone corrects one of them.
- **Forgets**: the union of both sides' tombstones (``smriti.portable.tombstones``); a
  memory a tombstone kills is deleted locally and not added, whatever its versions.
- **Cues**: the union by name (cue ids are per machine); when the two sides disagree
  on a cue's type or vector, the larger ``(cue_type, vector digest)`` wins.
- **Edges**: the union; an edge on both sides keeps the larger value (strength, then
  relation type and creation time for associations). Edges to memories that are gone
  are dropped. CoOccurs strengths count co-occurrences; taking the larger keeps the
  merge idempotent (a sum would grow on every sync) at the cost of under-counting
  co-occurrences first seen on two machines at once.
- **Metadata** carried by exports (Leiden's tuned state) is taken from the snapshot,
  the last pushed: it tunes clustering only, and adopting it lets an unchanged store
  export exactly the snapshot's lines, so nothing is pushed back.

Only the difference is written: deleted memories, new or newer records (through
``StorageBackend.import_records``, which replaces records with an existing id).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import ConfigError, InvalidInput
from smriti.logs import get_logger
from smriti.model import Association, CoOccurrence, Cue, Engram, Link, new_id
from smriti.portable import tombstones
from smriti.portable.canonical import _ms, _r, _vector_digest, engram_digest
from smriti.portable.format import (
    EMBEDDING_MODEL_KEY,
    EXPORTED_META_KEYS,
    KINDS,
    TOMBSTONE,
    LineDigest,
    association_from_record,
    cue_from_record,
    engram_from_record,
    open_text,
)
from smriti.portable.importer import ENGRAM_BATCH, IMPORT_BATCH, read_header, read_trailer
from smriti.portable.source import Source, mark_changed, source_of
from smriti.portable.tombstones import Tombstone

if TYPE_CHECKING:
    from smriti.backend import StorageBackend

log = get_logger(__name__)

EngramKey = tuple[int, int, str]
#: The order of successors of one memory (the smaller wins): (no time, time in ms, id).
SupersessionKey = tuple[bool, int, str]


@dataclass(slots=True)
class Graph:
    """One side of a merge, keyed the way the merge compares records."""

    engrams: dict[str, Engram] = field(default_factory=dict)
    cues: dict[str, Cue] = field(default_factory=dict)  # by name
    links: dict[tuple[str, str], float] = field(default_factory=dict)  # (engram, cue name)
    associations: dict[tuple[str, str], Association] = field(default_factory=dict)
    cooccurrences: dict[tuple[str, str], float] = field(default_factory=dict)  # cue names
    stones: dict[str, Tombstone] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    #: ``LineDigest`` of the file's lines after the header (snapshots read from files).
    body_digest: str = ""
    header: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class MergeReport:
    """What merging a snapshot changed in the local store."""

    added: int = 0
    updated: int = 0
    forgotten: int = 0
    cues: int = 0
    edges: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        """Whether the local store was written."""
        return bool(self.added or self.updated or self.forgotten or self.cues or self.edges)


# -- reading both sides --------------------------------------------------------------------
def read_snapshot(path: str | os.PathLike[str]) -> Graph:
    """Parse a whole export file into a Graph; InvalidInput when it is not a valid one.

    Nothing is written anywhere, so a bad file is refused before a merge starts.
    """
    file = Path(path)
    graph = Graph(header=read_header(file))
    trailer = read_trailer(file)
    names: dict[str, str] = {}
    counts = dict.fromkeys(KINDS, 0)
    digest = LineDigest()
    with open_text(file, "r") as f:
        f.readline()
        for lineno, line in enumerate(f, start=2):
            digest.update(line)
            if line.strip():
                try:
                    _read_line(graph, json.loads(line), names, counts)
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    raise InvalidInput(f"line {lineno} is not a valid record: {exc}") from exc
    expected = {k: int(v) for k, v in trailer.get("counts", {}).items() if k in KINDS}
    if {k: counts[k] for k in expected} != expected:
        raise InvalidInput(f"it holds {counts} but its trailer lists {expected}")
    graph.body_digest = digest.hexdigest()
    return graph


def _read_line(graph: Graph, r: dict[str, Any], names: dict[str, str], counts: dict) -> None:
    kind = r.get("kind")
    if kind == "engram":
        e = engram_from_record(r)
        graph.engrams[e.id] = e
    elif kind == "cue":
        c = cue_from_record(r)
        names[c.id] = c.name
        graph.cues[c.name] = c
    elif kind == "link":
        graph.links[(str(r["engram_id"]), names[str(r["cue_id"])])] = float(r["strength"])
    elif kind == "association":
        a = association_from_record(r)
        graph.associations[(a.source_id, a.target_id)] = a
    elif kind == "cooccurrence":
        pair = (names[str(r["source_id"])], names[str(r["target_id"])])
        graph.cooccurrences[pair] = float(r["strength"])
    elif kind == TOMBSTONE:
        t = Tombstone.from_record(r)
        graph.stones[t.id] = tombstones.combine(graph.stones.get(t.id), t) or t
    elif kind == "meta":
        graph.meta[str(r["key"])] = str(r["value"])
    plural = _PLURAL.get(str(kind))
    if plural is not None:
        counts[plural] += 1


_PLURAL = {"engram": "engrams", "cue": "cues", "link": "links", "association": "associations",
           "cooccurrence": "cooccurrences"}  # fmt: skip


def read_store(backend: StorageBackend) -> Graph:
    """The store's graph, keyed like a snapshot."""
    graph = Graph(stones=tombstones.load(backend))
    graph.engrams = {e.id: e for e in backend.iter_engrams()}
    ids: dict[str, str] = {}
    for c in backend.iter_cues():
        ids[c.id] = c.name
        graph.cues[c.name] = c
    for x in backend.iter_links():
        if x.cue_id in ids:
            graph.links[(x.engram_id, ids[x.cue_id])] = float(x.strength)
    graph.associations = {(a.source_id, a.target_id): a for a in backend.iter_associations()}
    for o in backend.iter_cooccurrences():
        if o.source_id in ids and o.target_id in ids:
            graph.cooccurrences[(ids[o.source_id], ids[o.target_id])] = float(o.strength)
    for key in EXPORTED_META_KEYS:
        value = backend.get_meta(key)
        if value is not None:
            graph.meta[key] = value
    return graph


# -- the rules -----------------------------------------------------------------------------
def engram_key(e: Engram) -> EngramKey:
    """The version order of one memory: last used, then most used, then content.

    Supersession stays out of it (see ``merged_engram``), so the winner of the other
    properties does not depend on which side saw the correction.
    """
    return (_ms(e.last_accessed_at) or 0, int(e.access_count), engram_digest(e, versions=False))


def supersession_key(e: Engram) -> SupersessionKey | None:
    """The order of ``e``'s successor among others (None while ``e`` is current).

    An earlier correction wins; a successor without a time (not written by Smriti)
    loses to any timed one; equal times fall back to the smaller successor id.
    """
    if not e.superseded_by:
        return None
    at = e.superseded_at
    return (at is None, _ms(at) or 0, e.superseded_by)


def merged_engram(sides: list[Engram]) -> Engram:
    """One memory from its versions on each side (at least one; see the module docstring).

    The other properties come from the version with the larger ``engram_key``; the
    successor is the smallest ``supersession_key`` of any side. Both choices are a max
    or a min, so the result is commutative, associative and idempotent.
    """
    winner = max(sides, key=engram_key)
    successors = [(k, e) for e in sides if (k := supersession_key(e)) is not None]
    if not successors:
        return winner
    key, first = min(successors, key=lambda pair: pair[0])
    if key == supersession_key(winner):
        return winner
    return winner.with_changes(superseded_by=first.superseded_by, superseded_at=first.superseded_at)


def _state(e: Engram) -> tuple[EngramKey, SupersessionKey | None]:
    """Everything the merge compares: equal states need no write."""
    return (engram_key(e), supersession_key(e))


def _cue_key(c: Cue) -> tuple[str, str]:
    return (c.cue_type, _vector_digest(c.embedding) or "")


def _assoc_key(a: Association) -> tuple[str, str, int]:
    return (_r(a.strength), a.relation_type, _ms(a.created_at) or -1)


def merged_graph(local: Graph, remote: Graph) -> Graph:
    """The merge of two graphs (see the module docstring); inputs are not changed."""
    out = Graph(stones=tombstones.merge_all(local.stones, remote.stones))
    for key in local.engrams.keys() | remote.engrams.keys():
        sides = [e for e in (local.engrams.get(key), remote.engrams.get(key)) if e is not None]
        winner = merged_engram(sides)
        stone = out.stones.get(key)
        if stone is None or not stone.kills(winner):
            out.engrams[key] = winner
    for name in local.cues.keys() | remote.cues.keys():
        sides = [c for c in (local.cues.get(name), remote.cues.get(name)) if c is not None]
        out.cues[name] = max(sides, key=_cue_key)
    for lk, s in _union_max(local.links, remote.links, _r).items():
        if lk[0] in out.engrams and lk[1] in out.cues:
            out.links[lk] = s
    for ak, a in _union_max(local.associations, remote.associations, _assoc_key).items():
        if ak[0] in out.engrams and ak[1] in out.engrams:
            out.associations[ak] = a
    for ok, s in _union_max(local.cooccurrences, remote.cooccurrences, _r).items():
        if ok[0] in out.cues and ok[1] in out.cues:
            out.cooccurrences[ok] = s
    out.meta = {**local.meta, **remote.meta}
    return out


def _union_max(a: dict[Any, Any], b: dict[Any, Any], rank: Any) -> dict[Any, Any]:
    out = dict(a)
    for key, value in b.items():
        if key not in out or rank(value) > rank(out[key]):
            out[key] = value
    return out


# -- applying the difference ---------------------------------------------------------------
def merge_snapshot(target: Source, snapshot: str | os.PathLike[str] | Graph) -> MergeReport:
    """Merge an export file (a path, or a Graph from ``read_snapshot``) into ``target``.

    See the module docstring for the rules. Raises InvalidInput when the file is not a
    valid export and ConfigError when it was embedded with another model than the
    store's; nothing is written then.
    """
    started = time.perf_counter()
    backend, embedder = source_of(target)
    remote = snapshot if isinstance(snapshot, Graph) else read_snapshot(snapshot)
    _check_model(backend, embedder.model_id if embedder else None, remote.header)
    # Forgets wait while the merge reads and writes: a memory forgotten meanwhile could
    # otherwise be written back from the snapshot's copy.
    with tombstones.LOCK:
        local = read_store(backend)
        report = _apply(backend, local, merged_graph(local, remote))
    report.seconds = round(time.perf_counter() - started, 3)
    if report.changed:
        mark_changed(target)
    return report


def _check_model(backend: StorageBackend, current: str | None, header: dict[str, Any]) -> None:
    theirs = header.get("embedding_model")
    ours = backend.get_meta(EMBEDDING_MODEL_KEY) or current
    if theirs and ours and theirs != ours:
        raise ConfigError(
            f"it was embedded with {theirs!r} but this store uses {ours!r}; memories of two "
            "embedding models cannot be merged: configure the same embedder on every machine"
        )


def _apply(backend: StorageBackend, local: Graph, merged: Graph) -> MergeReport:
    report = MergeReport()
    gone = [k for k in local.engrams if k not in merged.engrams]
    engrams = [
        e
        for k, e in merged.engrams.items()
        if k not in local.engrams or _state(local.engrams[k]) != _state(e)
    ]
    report.added = sum(1 for e in engrams if e.id not in local.engrams)
    report.updated = len(engrams) - report.added
    cues, ids = _cue_changes(local, merged)
    report.cues = len(cues)
    links = [
        Link(e, ids[n], s)
        for (e, n), s in merged.links.items()
        if (e, n) not in local.links or _r(local.links[(e, n)]) != _r(s)
    ]
    assoc = [
        a
        for k, a in merged.associations.items()
        if k not in local.associations or _assoc_key(local.associations[k]) != _assoc_key(a)
    ]
    cooc = [
        CoOccurrence(ids[a], ids[b], s)
        for (a, b), s in merged.cooccurrences.items()
        if (a, b) not in local.cooccurrences or _r(local.cooccurrences[(a, b)]) != _r(s)
    ]
    report.edges = len(links) + len(assoc) + len(cooc)
    if merged.stones != local.stones:
        tombstones.save(backend, merged.stones)
    if gone:
        report.forgotten = backend.delete_engrams(gone)
    for start in range(0, max(len(engrams), 1 if cues else 0), ENGRAM_BATCH):
        first = cues if start == 0 else []
        backend.import_records(engrams[start : start + ENGRAM_BATCH], first, [], [], [])
    edges: list[tuple[str, Any]] = [
        *(("links", x) for x in links),
        *(("associations", x) for x in assoc),
        *(("cooccurrences", x) for x in cooc),
    ]
    for start in range(0, len(edges), IMPORT_BATCH):
        chunk = edges[start : start + IMPORT_BATCH]
        parts = {k: [x for kind, x in chunk if kind == k] for k in KINDS[2:]}
        backend.import_records([], [], parts["links"], parts["associations"],
                               parts["cooccurrences"])  # fmt: skip
    for key, value in merged.meta.items():
        if local.meta.get(key) != value:
            backend.set_meta(key, value)
    return report


def _cue_changes(local: Graph, merged: Graph) -> tuple[list[Cue], dict[str, str]]:
    """Cues to write (new ones, and local ones whose remote version won) and name → id."""
    ids = {name: c.id for name, c in local.cues.items()}
    used = set(ids.values())
    out: list[Cue] = []
    for name, cue in merged.cues.items():
        mine = local.cues.get(name)
        if mine is None:
            cid = cue.id if cue.id not in used else new_id()
            used.add(cid)
            ids[name] = cid
            out.append(Cue(cid, name, cue.cue_type, cue.embedding))
        elif _cue_key(mine) != _cue_key(cue):
            out.append(Cue(mine.id, name, cue.cue_type, cue.embedding))
    return out, ids
