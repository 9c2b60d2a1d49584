"""When it happened: ``occurred_at`` on store dates a memory, the ``since``/``until``
filters read it, and dates a query names raise the memories of that time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from smriti.engine import Engine
from smriti.engine.when import AFTER_DAYS, Window, windows
from smriti.errors import InvalidInput
from smriti.model import utcnow


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did Joanna watch on 1 May, 2022?", Window(2022, 5, 1)),
        ("the talk on October 13th, 2023 was long", Window(2023, 10, 13)),
        ("since 2023-05-01", Window(2023, 5, 1)),
        ("What did she finish in January 2022?", Window(2022, 1, None)),
        ("Where did Melanie camp in June?", Window(None, 6, None)),
        ("How often did he swim in 2023?", Window(2023, None, None)),
        ("What did she do in May?", Window(None, 5, None)),
    ],
)
def test_windows_of_named_dates(text: str, expected: Window) -> None:
    assert windows(text) == (expected,)


@pytest.mark.parametrize("text", ["May I ask what you did?", "Did Mar go home?", "the 404 page"])
def test_no_window_without_a_date(text: str) -> None:
    assert windows(text) == ()


def test_an_impossible_day_falls_back_to_its_month() -> None:
    assert windows("on 31 February, 2022") == (Window(2022, 2, None),)


def test_a_window_reaches_a_few_days_past_its_end() -> None:
    day = Window(2022, 5, 1)
    assert day.contains(datetime(2022, 5, 1, 20, tzinfo=UTC))
    assert day.contains(datetime(2022, 5, 1, tzinfo=UTC) + timedelta(days=AFTER_DAYS))
    assert not day.contains(datetime(2022, 4, 30, 23, tzinfo=UTC))
    assert not day.contains(datetime(2022, 5, 2, tzinfo=UTC) + timedelta(days=AFTER_DAYS))
    december = Window(None, 12, None)
    assert december.contains(datetime(2019, 12, 24, tzinfo=UTC))
    assert december.contains(datetime(2020, 1, 3, tzinfo=UTC)), "told in the new year"
    assert not december.contains(datetime(2020, 2, 3, tzinfo=UTC))


def test_occurred_at_dates_the_memory_and_the_filters_read_it(engine: Engine) -> None:
    old = engine.store("Joanna watched a film at the cinema", occurred_at="2022-05-01T21:00:00Z")
    new = engine.store("Joanna watched a film at home with friends")
    assert old.engram.created_at == datetime(2022, 5, 1, 21, tzinfo=UTC)
    assert old.to_dict()["created_at"] == "2022-05-01T21:00:00+00:00"
    assert new.engram.created_at > utcnow() - timedelta(minutes=5)
    before = engine.recall("Joanna film", limit=5, until="2023-01-01")
    assert [r.engram.id for r in before] == [old.engram.id]
    since = engine.recall("Joanna film", limit=5, since="2023-01-01")
    assert [r.engram.id for r in since] == [new.engram.id]


@pytest.mark.parametrize("value", ["yesterday", "2999-01-01", 12])
def test_occurred_at_must_be_a_past_iso_date(engine: Engine, value: object) -> None:
    with pytest.raises(InvalidInput, match="occurred_at"):
        engine.store("Joanna watched a film", occurred_at=value)


def test_a_date_in_the_query_raises_the_memories_of_that_time(engine: Engine) -> None:
    told = {
        "2022-04-03": "Joanna: I watched a great movie at the cinema last night.",
        "2022-05-02": "Joanna: I watched a movie trilogy last night, it was great.",
        "2022-06-12": "Joanna: I watched another great movie last night at home.",
    }
    ids = {day: engine.store(text, occurred_at=day).engram.id for day, text in told.items()}
    for day in ("2022-04-03", "2022-06-12"):
        results = engine.recall(f"What movie did Joanna watch on {day}?", limit=3)
        assert results[0].engram.id == ids[day], [r.engram.content for r in results]
    results = engine.recall("What movie did Joanna watch on 1 May, 2022?", limit=3)
    assert results[0].engram.id == ids["2022-05-02"], [r.engram.content for r in results]
