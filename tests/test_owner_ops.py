"""The operations table the owner serves, run in this process on a real Kùzu store:
a store repeated with its id is stored once, a repeated forget says what happened."""

from __future__ import annotations

import pytest

from smriti.engine import Engine
from smriti.errors import InvalidInput, NotFound
from smriti.model import new_id
from smriti.owner.service import LocalService
from smriti.requests import ForgetRequest, StoreRequest


def test_a_store_repeated_with_its_id_is_stored_once(engine: Engine) -> None:
    memory = LocalService(engine)
    key = new_id()
    args = {"content": "Ada keeps the spare keys in the blue jar", "memory_id": key}
    first = memory.call("store", args)
    again = memory.call("store", {**args, "repeated": True})
    assert first["id"] == again["id"] == key
    assert {c["name"] for c in again["cues"]} == {c["name"] for c in first["cues"]}
    assert again["associations"] == first["associations"]
    assert engine.stats()["engrams"] == 1


def test_a_chosen_id_must_look_like_one(engine: Engine) -> None:
    with pytest.raises(InvalidInput, match="32 lower-case hex"):
        LocalService(engine).call("store", {"content": "x", "memory_id": "../../etc"})
    assert engine.stats()["engrams"] == 0


def test_a_repeated_forget_of_a_forgotten_memory_says_it_is_forgotten(engine: Engine) -> None:
    memory = LocalService(engine)
    key = memory.run(StoreRequest("a memory to forget"))["id"]
    assert memory.run(ForgetRequest(key))["id"] == key
    with pytest.raises(NotFound, match="is forgotten, but the Smriti owner process stopped"):
        memory.call("forget", {"memory_id": key, "repeated": True})
    with pytest.raises(NotFound, match="no memory with id"):
        memory.call("forget", {"memory_id": new_id(), "repeated": True})


def test_unknown_operations_are_refused(engine: Engine) -> None:
    with pytest.raises(InvalidInput, match="unknown operation"):
        LocalService(engine).call("drop_everything", {})


def test_a_rewrite_of_the_whole_store_waits_for_writes_and_holds_new_ones() -> None:
    import threading
    import time

    from smriti.backend import WriteGate

    gate = WriteGate()
    order: list[str] = []
    with gate.shared():
        rewrite = threading.Thread(target=lambda: _hold(gate, order))
        rewrite.start()
        time.sleep(0.2)
        assert order == []  # waits for the write under way
        later = threading.Thread(target=lambda: _write(gate, order))
        later.start()
        time.sleep(0.2)
        assert order == []  # a new write waits behind the rewrite
    rewrite.join(5)
    later.join(5)
    assert order == ["rewrite", "write"]


def _hold(gate, order: list[str]) -> None:  # noqa: ANN001
    with gate.exclusive():
        order.append("rewrite")


def _write(gate, order: list[str]) -> None:  # noqa: ANN001
    with gate.shared():
        order.append("write")
