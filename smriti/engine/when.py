"""Dates a query names, as time windows that the memories of that time fall in.

"What did Joanna watch on 1 May, 2022?" asks about a memory made around that day;
recall raises the memories whose ``created_at`` (when it happened: ``occurred_at`` on
store) lies in such a window (``smriti.engine.fusion``). Absolute dates only: a day
("1 May, 2022", "May 1st 2022", "2022-05-01"), a month ("January 2022", "in May"; a
month without a year matches it in every year) or a year ("in 2023"). A window extends
``AFTER_DAYS`` past its end, since people tell of an event in the days after it ("I watched
it last night").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        )
    )
    for name in names
}  # fmt: skip
#: How many days after a named date a memory of it may still be made.
AFTER_DAYS = 7

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = [
    re.compile(rf"\b{_YEAR}-(?P<num>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_YEAR}\b"),
    # A month alone: capitalised, and "May" only after a word that introduces a time.
    re.compile(
        r"\b(?:(?:in|of|on|during|since|until|early|mid|late|last|this|next)\s+)?"
        rf"(?P<month>{'|'.join(m.capitalize() for m in MONTHS if len(m) > 3 or m == 'may')})\b"
    ),
]


@dataclass(frozen=True, slots=True)
class Window:
    """A span of time a query names; ``year`` None matches its months in any year."""

    year: int | None
    month: int | None
    day: int | None

    def contains(self, moment: datetime) -> bool:
        """Whether ``moment`` lies in this window or up to ``AFTER_DAYS`` past its end."""
        moment = moment.astimezone(UTC)
        after = timedelta(days=AFTER_DAYS)
        years = (self.year,) if self.year is not None else (moment.year, moment.year - 1)
        for year in years:
            if year is None or not 1 <= year < 9999:
                continue
            start, end = self._span(year)
            if start <= moment < end + after:
                return True
        return False

    def _span(self, year: int) -> tuple[datetime, datetime]:
        if self.month is None:
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        start = datetime(year, self.month, self.day or 1, tzinfo=UTC)
        if self.day is not None:
            return start, start + timedelta(days=1)
        nxt = datetime(year + self.month // 12, self.month % 12 + 1, 1, tzinfo=UTC)
        return start, nxt


def windows(text: str) -> tuple[Window, ...]:
    """The time windows of the absolute dates ``text`` names, each date once."""
    found: list[Window] = []
    taken: list[tuple[int, int]] = []
    for i, pattern in enumerate(_PATTERNS):
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            if i == len(_PATTERNS) - 1 and m.group("month") == "May" and m.group(0) == "May":
                continue  # "May I ask ..." is no date
            window = _window(m.groupdict())
            if window is not None:
                found.append(window)
                taken.append(m.span())
    return tuple(dict.fromkeys(found))


def _window(parts: dict[str, str | None]) -> Window | None:
    year = int(parts["year"]) if parts.get("year") else None
    name = (parts.get("month") or "").lower()
    month = int(parts["num"]) if parts.get("num") else MONTHS.get(name)
    day = int(parts["day"]) if parts.get("day") else None
    if month is not None and not 1 <= month <= 12:
        return None
    if day is not None:
        try:
            datetime(year or 2000, month or 1, day)
        except ValueError:
            return None
    return Window(year, month, day)
