"""How a user's memory grew: the memories created each month, and the running total.

Read through the storage contract's ``list_page`` a page at a time (every backend has
it; the working set answers it from memory), so it costs one pass over the memories
and holds one page at a time. Superseded versions count too, as ``stats`` counts them:
each was a memory stored at its time.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from smriti.backend import Listing, list_key

if TYPE_CHECKING:
    from smriti.engine.core import Engine

#: Memories read per page.
PAGE = 5000


def growth(engine: Engine, page: int = PAGE) -> dict[str, Any]:
    """``months``: one row per month with a memory created in it, oldest first
    (``month`` as ``YYYY-MM`` in UTC, ``added``, running ``total``); ``total``."""
    months: Counter[str] = Counter()
    after = None
    while True:
        listing = Listing(page, include_superseded=True, after=after)
        batch = engine.backend.list_page(listing)
        months.update(e.created_at.strftime("%Y-%m") for e in batch)
        if len(batch) < page:
            break
        after = list_key(batch[-1])
    rows, total = [], 0
    for month in sorted(months):
        total += months[month]
        rows.append({"month": month, "added": months[month], "total": total})
    return {"months": rows, "total": total}
