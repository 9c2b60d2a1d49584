"""Bulk inserts through Kùzu's ``COPY`` from a temporary CSV file.

``UNWIND ... MATCH`` by id is a hash join over the whole table in Kùzu 0.11; ``COPY`` of
rows known to be new (both endpoints of an edge existing) is 100x faster (README).
Used by imports and by folding co-occurrences.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from smriti_embedded_graph.store import GraphStore


def copy_rows(
    store: GraphStore,
    conn: Any,
    table: str,
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    text: str | None = None,
) -> None:
    """COPY ``rows`` into ``table`` through a temporary CSV file, in ``conn``'s
    transaction (a missing or None value is an empty cell); ``text`` is their
    ``csv_text`` when already made. Only for rows known not to exist yet (and, for
    edges, whose endpoints both exist)."""
    if not rows:
        return
    with tempfile.TemporaryDirectory(prefix="smriti-kuzu-") as tmp:
        path = os.path.join(tmp, f"{table}.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            f.write(csv_text(rows, columns) if text is None else text)
        store.exec(conn, f"COPY {table} FROM '{quote_path(path)}' (HEADER=false)")


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """``rows`` as CSV for Kùzu's COPY, values converted a column at a time."""
    cells = [_csv_column([r.get(c) for r in rows]) for c in columns]
    out = io.StringIO(newline="")
    csv.writer(out).writerows(zip(*cells, strict=True))
    return out.getvalue()


def _csv_value(value: object) -> object:
    """A CSV cell Kùzu's COPY parses back to the same value (None is an empty cell)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, float):
        return repr(value)
    return value


def _csv_column(values: list[Any]) -> list[Any]:
    """``_csv_value`` of each value, with fast paths for all-number and all-timestamp
    columns (an import writes a million link rows sharing one timestamp)."""
    kinds = {type(v) for v in values} - {type(None)}
    if kinds == {str} and None not in values:
        return values  # the csv writer quotes what needs quoting
    if kinds <= {float, int}:
        return ["" if v is None else repr(v) for v in values]
    if kinds == {datetime}:
        text: dict[datetime, str] = {}
        return [
            "" if v is None else text.get(v) or text.setdefault(v, v.isoformat(sep=" "))
            for v in values
        ]
    return [_csv_value(v) for v in values]


def quote_path(path: str) -> str:
    """``path`` for a COPY statement (temporary paths never need quoting; refuse if so)."""
    if "'" in path or "\\" in path:
        raise ValueError(f"unsupported temporary path {path!r}")
    return path
