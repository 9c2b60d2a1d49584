"""DeferredWrites: the background writes a server backend defers (recall's access updates)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from smriti.backend import DeferredWrites


def _gated(done: list[int]) -> tuple[threading.Event, Callable[[], None]]:
    """A write that appends 1 to ``done`` once the returned event is set."""
    gate = threading.Event()

    def slow() -> None:
        gate.wait(5)
        done.append(1)

    return gate, slow


def test_writes_run_in_order_and_drain_waits_for_them() -> None:
    writes = DeferredWrites("test")
    done: list[int] = []
    gate, slow = _gated(done)
    writes.submit(slow)
    writes.submit(lambda: done.append(2))
    assert done == []  # the first write is still waiting: nothing has run
    gate.set()
    writes.drain()
    assert done == [1, 2]
    writes.close()


def test_a_failed_write_is_dropped_and_later_writes_still_run() -> None:
    writes = DeferredWrites("test")
    done: list[str] = []

    def fail() -> None:
        raise RuntimeError("server gone")

    writes.submit(fail)
    writes.submit(lambda: done.append("after"))
    writes.drain()  # does not raise: the failure is logged
    assert done == ["after"]
    writes.close()


def test_close_finishes_pending_writes_and_the_object_stays_usable() -> None:
    writes = DeferredWrites("test")
    done: list[int] = []
    gate, slow = _gated(done)
    writes.submit(slow)
    threading.Timer(0.05, gate.set).start()
    writes.close()
    assert done == [1]
    writes.submit(lambda: done.append(2))
    writes.close()
    assert done == [1, 2]
