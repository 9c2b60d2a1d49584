"""CoOccurs counts: recorded with each memory, folded into the edges in batches.

Bumping the CoOccurs edges of a 12-cue memory (132 directed pairs) in place costs Kùzu
0.11.3 ~8 ms at 100k memories: the edges of hub cues are scanned to find the pairs,
and each property update is a random write. So ``add_memory`` only records the
memory's cue ids, in the same transaction, as one ``CoOccursQueue`` row (created with
the engram, in the same statement). Folding (``WriteBehind.fold_cooccurrences``,
``CoOccurrences.fold``) turns every pending row into edge updates at once: the summed
deltas staged in ``CoOccursStage`` (by UNWIND), one join that adds them to the existing
edges, one COPY that creates the missing ones (~1.5 ms per memory for 2,000 pending).

Nothing is lost or visible half-done: the pending rows are durable and are folded, in
one transaction, before anything reads or replaces CoOccurs edges (``counts``,
``iter_cooccurrences``, ``import_records``, ``delete_orphan_cues``, so also before every
consolidation and export), and whenever ``FOLD_PENDING`` rows have accumulated.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from itertools import permutations
from typing import Any

from smriti.backend import batched
from smriti_embedded_graph.bulk import copy_rows
from smriti_embedded_graph.cuemap import CueMap
from smriti_embedded_graph.store import GraphStore

#: Pending memories that trigger a fold on the next store.
FOLD_PENDING = 1000
#: Stage rows per UNWIND statement.
STAGE_BATCH = 5000
_STAGE_CREATE = "UNWIND $rows AS r CREATE (:CoOccursStage {id: r.id, a: r.a, b: r.b, d: r.d})"


class CoOccurrences:
    """The count of memories whose co-occurrences wait, and the fold that applies them
    (in the caller's transaction, through ``store``; ``cues`` tells which cues exist)."""

    def __init__(self, store: GraphStore, cues: CueMap) -> None:
        self._store = store
        self._cues = cues
        #: How many memories wait to be folded (read at open, then kept in step).
        self.pending = 0

    def load_pending(self) -> None:
        """Read how many memories wait to be folded (at open)."""
        self.pending = int(self._store.read("MATCH (p:CoOccursQueue) RETURN count(p)")[0][0])

    def fold(self, conn: Any, new_cues: Iterable[str] = ()) -> int:
        """Fold every pending memory in ``conn``'s transaction; returns how many.
        ``new_cues`` are created in it too (and may not be known to ``cues`` yet)."""
        rows = self._store.exec(conn, "MATCH (p:CoOccursQueue) RETURN p.cues").get_all()
        known = self._cues.by_id.keys() | set(new_cues)
        new: list[dict[str, Any]] = []
        deltas: Counter[tuple[str, str]] = Counter()
        for (cues,) in rows:
            # A cue deleted since (an orphan) takes its co-occurrences with it.
            deltas.update(permutations([c for c in dict.fromkeys(cues) if c in known], 2))
        if deltas:
            pairs = list(deltas.items())
            fold = uuid.uuid4().hex
            stage = [
                {"id": f"{fold}:{i}", "a": a, "b": b, "d": float(d)}
                for i, ((a, b), d) in enumerate(pairs)
            ]
            # Created by UNWIND, not COPY: a node COPY whose rows the same transaction
            # deletes left a write-ahead log that crashed Kùzu 0.11.3 when replayed
            # after a kill (bench/kill_stress.py). Keys are never reused (see schema).
            for batch in batched(stage, STAGE_BATCH):
                self._store.exec(conn, _STAGE_CREATE, {"rows": batch})
            matched = self._store.exec(
                conn,
                "MATCH (s:CoOccursStage), (a:Cue)-[x:CoOccurs]->(b:Cue) "
                "WHERE a.id = s.a AND b.id = s.b SET x.strength = x.strength + s.d RETURN s.id",
            ).get_all()
            existing = {int(r[0].rpartition(":")[2]) for r in matched}
            new = [
                {"a": a, "b": b, "s": float(d)}
                for i, ((a, b), d) in enumerate(pairs)
                if i not in existing
            ]
            self._store.exec(conn, "MATCH (s:CoOccursStage) DELETE s")
        self._store.exec(conn, "MATCH (p:CoOccursQueue) DELETE p")
        # Last: rolling back after a rel COPY loses earlier edges in Kùzu 0.11.3 (README).
        copy_rows(self._store, conn, "CoOccurs", new, ("a", "b", "s"))
        return len(rows)
