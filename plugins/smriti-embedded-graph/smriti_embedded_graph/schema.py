"""Kùzu schema and its migrations, applied in order and recorded in ``Meta``.

Each migration is a list of idempotent statements (``IF NOT EXISTS``), so a store made
by any older version of this plugin opens and is brought up to date, and a crash in
the middle of a migration is repaired by the next open (a statement prefixed
``IF TABLE name:`` runs only while that table exists).

Version 4 keys the pending co-occurrence rows by their memory's id (``CoOccursQueue``)
instead of a ``SERIAL`` (``CoOccursPending``, left empty). With the ``SERIAL`` key, a
store killed after its pending rows had been folded (deleted) could no longer be
opened in Kùzu 0.11.3: its write-ahead log failed to replay ("Found duplicated primary
key value 185"), and at its last checkpoint, with no pending row left, inserting one
failed once the sequence reached 185: the key index still held keys of deleted rows.
Keys that are never reused avoid it (``bench/kill_stress.py``).

Version 5 adds the version fields of an engram: ``supersedes`` and ``superseded_by``
(``''`` on every existing row: a first, current version) and ``superseded_at`` (null).
Adding columns with defaults rewrites no row's other columns, so no data can be lost.

Version 6 adds who said it: ``origin`` and ``principal`` (``''`` on every existing
row: unknown, never guessed).
"""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION_KEY = "schema_version"

#: (version, statements). Never edit a released migration; append a new one.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING, value STRING, PRIMARY KEY(key))",
            "CREATE NODE TABLE IF NOT EXISTS Engram(id STRING, content STRING, summary STRING, "
            "memory_type STRING, importance DOUBLE, access_count INT64, created_at TIMESTAMP, "
            "last_accessed_at TIMESTAMP, decay_factor DOUBLE, embedding STRING, source STRING, "
            "tags STRING[], PRIMARY KEY(id))",
            "CREATE NODE TABLE IF NOT EXISTS Cue(id STRING, name STRING, cue_type STRING, "
            "embedding STRING, PRIMARY KEY(id))",
            "CREATE REL TABLE IF NOT EXISTS EncodedBy(FROM Engram TO Cue, strength DOUBLE, "
            "created_at TIMESTAMP)",
            "CREATE REL TABLE IF NOT EXISTS AssociatedWith(FROM Engram TO Engram, "
            "strength DOUBLE, relation_type STRING, created_at TIMESTAMP)",
            "CREATE REL TABLE IF NOT EXISTS CoOccurs(FROM Cue TO Cue, strength DOUBLE)",
        ],
    ),
    (
        2,
        [
            # Leiden cluster per engram; -1 means unassigned.
            "ALTER TABLE Engram ADD IF NOT EXISTS cluster_id INT64 DEFAULT -1",
            # Tags as one string, so the FTS index (STRING columns only) can cover them.
            "ALTER TABLE Engram ADD IF NOT EXISTS tags_text STRING DEFAULT ''",
            "MATCH (e:Engram) WHERE e.tags IS NOT NULL SET e.tags_text = list_reduce("
            "list_transform(e.tags, x -> ' ' + x), (a, b) -> a + b)",
        ],
    ),
    (
        3,
        [
            # Co-occurrences recorded per memory and folded into CoOccurs in batches
            # (cooccurs.py); the stage holds the summed deltas of one fold.
            "CREATE NODE TABLE IF NOT EXISTS CoOccursPending(id SERIAL, cues STRING[], "
            "PRIMARY KEY(id))",
            "CREATE NODE TABLE IF NOT EXISTS CoOccursStage(id STRING, a STRING, b STRING, "
            "d DOUBLE, PRIMARY KEY(id))",
        ],
    ),
    (
        4,
        [
            # Pending co-occurrences keyed by memory id, not by a SERIAL (module doc).
            "CREATE NODE TABLE IF NOT EXISTS CoOccursQueue(id STRING, cues STRING[], "
            "PRIMARY KEY(id))",
            "IF TABLE CoOccursPending: MATCH (p:CoOccursPending) "
            "MERGE (q:CoOccursQueue {id: 'serial-' + CAST(p.id AS STRING)}) SET q.cues = p.cues",
            "IF TABLE CoOccursPending: MATCH (p:CoOccursPending) DELETE p",
        ],
    ),
    (
        5,
        [
            # Corrections (issue 20): the memory this one corrected, and the one that
            # corrected it, when. Empty strings, not nulls, so filters compare plainly.
            "ALTER TABLE Engram ADD IF NOT EXISTS supersedes STRING DEFAULT ''",
            "ALTER TABLE Engram ADD IF NOT EXISTS superseded_by STRING DEFAULT ''",
            "ALTER TABLE Engram ADD IF NOT EXISTS superseded_at TIMESTAMP",
        ],
    ),
    (
        6,
        [
            # Who said it (issue 36): user, agent, import:<format> or tool, and the
            # authenticated caller that stored it.
            "ALTER TABLE Engram ADD IF NOT EXISTS origin STRING DEFAULT ''",
            "ALTER TABLE Engram ADD IF NOT EXISTS principal STRING DEFAULT ''",
        ],
    ),
]

CURRENT_VERSION = MIGRATIONS[-1][0]


def _tables(conn: Any) -> set[str]:
    return {row[1] for row in conn.execute("CALL SHOW_TABLES() RETURN *").get_all()}


def stored_version(conn: Any) -> int:
    """The schema version recorded in the store (0 for a new or pre-Meta store)."""
    if "Meta" not in _tables(conn):
        return 0
    rows = conn.execute(
        "MATCH (m:Meta {key: $k}) RETURN m.value", {"k": SCHEMA_VERSION_KEY}
    ).get_all()
    return int(rows[0][0]) if rows else 0


def migrate(conn: Any, target: int = CURRENT_VERSION) -> list[int]:
    """Apply the migrations newer than the stored version up to ``target``.

    Returns the versions applied (empty when the store is current).
    """
    current = stored_version(conn)
    applied: list[int] = []
    for version, statements in MIGRATIONS:
        if version <= current or version > target:
            continue
        for statement in statements:
            if statement.startswith("IF TABLE "):
                table, statement = statement.removeprefix("IF TABLE ").split(": ", 1)
                if table not in _tables(conn):
                    continue
            conn.execute(statement)
        conn.execute(
            "MERGE (m:Meta {key: $k}) SET m.value = $v",
            {"k": SCHEMA_VERSION_KEY, "v": str(version)},
        )
        applied.append(version)
    return applied
