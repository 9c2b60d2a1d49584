"""Concurrent writers and sessions: nothing lost, nothing counted twice, no failures.

Every write transaction locks the nodes it changes in one global order (cues by key,
then engrams by id; see ``cypher.py``), so concurrent stores sharing cues wait for each
other instead of deadlocking, and the rare transient error left (the server's deadlock
detector also reports some waits on commit-time locks) is retried. These tests drive
that from many threads and check the outcome exactly. They assert no timings.
"""

from __future__ import annotations

import itertools
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from smriti_backend_neo4j.backend import Neo4jBackend

from smriti.backend import BackendError, Seek
from smriti.config import Settings
from smriti.engine import Engine
from smriti.plugins import create_plugin_manager
from smriti.testing import GraphBuilder

from .conftest import ServerInfo, wipe

DEADLOCK = "Neo.TransientError.Transaction.DeadlockDetected"
SESSIONS = 20
CALLS = 240
WORDS = ("apple", "river", "newton", "gravity", "music", "paris", "kiwi", "zebra", "orbit")
TAGS = ("work", "home")


def test_parallel_add_memory_with_shared_cues(make_backend: Callable[..., Neo4jBackend]) -> None:
    build = GraphBuilder(8)
    backend = make_backend("alice")
    shared = [build.cue(name) for name in ("apple", "pear", "plum")]

    def store(i: int) -> None:
        own = build.cue(f"own{i}")
        cues = [*shared, own]
        random.Random(i).shuffle(cues)  # each writer lists the shared cues in its own order
        backend.add_memory(build.engram(i), cues, [])

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(store, range(30)))

    counts = backend.counts()
    assert counts["engrams"] == 30 and counts["cues"] == 33 and counts["links"] == 120
    strengths = {(c.source_id, c.target_id): c.strength for c in backend.iter_cooccurrences()}
    assert strengths[(shared[0].id, shared[1].id)] == 30.0
    assert strengths[(shared[2].id, shared[0].id)] == 30.0
    assert strengths[("c-own7", shared[1].id)] == 1.0
    assert len(strengths) == 6 + 30 * 6
    assert backend.retries[DEADLOCK] == 0


@pytest.fixture
def engine(neo4j_server: ServerInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """One user's Engine on the Neo4j server, shared by every session (as in a server)."""
    wipe(neo4j_server)
    environ = {
        "ACCESSING_USER": "carol",
        "DB_TYPE": "neo4j",
        "NEO4J_URI": neo4j_server.uri,
        "NEO4J_USERNAME": neo4j_server.username,
        "NEO4J_PASSWORD": neo4j_server.password,
        "STORAGE_LOCATION": str(tmp_path_factory.mktemp("store")),
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_SYNC_INTERVAL": "0",
        "INDEX_THRESHOLD": "10",  # vector indexes exist before the sessions start
        "SMRITI_LOAD_PLUGINS": "smriti-backend-neo4j",
        "SMRITI_STRICT_PLUGINS": "1",
    }
    pm, _ = create_plugin_manager(environ=environ)
    with Engine.from_settings(Settings.from_env(environ), pm=pm) as opened:
        yield opened


def _text(rng: random.Random, i: int) -> tuple[str, str]:
    """A note over shared words in a random order (so cues come in any order) and tags."""
    words = rng.sample(WORDS, k=4)
    tags = ",".join(rng.sample(TAGS, k=rng.randint(1, 2)))
    return f"{' '.join(words).capitalize()} notes, number {i}.", tags


class Sessions:
    """The outcome of many sessions' calls: what was acknowledged, and what failed."""

    def __init__(self, engine: Engine, preloaded: list[str]) -> None:
        self.engine = engine
        self.lock = threading.Lock()
        self.cues: dict[str, list[str]] = {}  # acknowledged engram -> its cue ids
        self.pool = list(preloaded)  # memories a forget may take
        self.forgotten: list[str] = []
        self.failures: list[str] = []

    def call(self, kind: str, arg: object) -> None:
        try:
            if kind == "store":
                text, tags = arg  # type: ignore[misc]
                outcome = self.engine.store(text, importance=0.7, tags=tags)
                with self.lock:
                    self.cues[outcome.engram.id] = [c.id for c in outcome.cues]
                    self.pool.append(outcome.engram.id)
            elif kind in ("recall", "search", "list"):
                self.engine.recall(arg, limit=5, mode=kind)
            elif kind == "forget":
                with self.lock:
                    victim = self.pool.pop(int(arg) % len(self.pool)) if self.pool else None  # type: ignore[call-overload]
                if victim is not None:
                    self.engine.forget(victim)
                    with self.lock:
                        self.forgotten.append(victim)
            else:
                self.engine.stats()
        except Exception as exc:  # every failure is collected and asserted on
            with self.lock:
                self.failures.append(f"{kind}: {type(exc).__name__}: {exc}")


def test_twenty_sessions_of_mixed_calls_keep_every_acknowledged_write(engine: Engine) -> None:
    rng = random.Random(2026)
    preload = [engine.store(text, 0.7, tags) for text, tags in (_text(rng, i) for i in range(15))]
    sessions = Sessions(engine, [o.engram.id for o in preload])
    sessions.cues.update({o.engram.id: [c.id for c in o.cues] for o in preload})
    kinds = rng.choices(
        ["store", "recall", "search", "list", "forget", "stats"], [40, 24, 6, 5, 15, 10], k=CALLS
    )
    todo: queue.Queue[tuple[str, object]] = queue.Queue()
    for i, kind in enumerate(kinds):
        arg = {"store": _text(rng, 100 + i), "forget": rng.randrange(1000)}.get(
            kind, " ".join(rng.sample(WORDS, k=2))
        )
        todo.put((kind, arg))

    def session() -> None:
        while True:
            try:
                kind, arg = todo.get_nowait()
            except queue.Empty:
                return
            sessions.call(kind, arg)

    threads = [threading.Thread(target=session) for _ in range(SESSIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sessions.failures == []
    backend = engine.backend
    gone = set(sessions.forgotten)
    kept = set(sessions.cues) - gone
    assert len(gone) == kinds.count("forget"), "every forget found a memory to delete"
    assert {e.id for e in backend.iter_engrams()} == kept
    assert backend.get_engrams(sorted(gone)) == []
    links = list(backend.iter_links())
    assert {(x.engram_id, x.cue_id) for x in links} == {
        (e, c) for e in kept for c in sessions.cues[e]
    }, "every kept memory has exactly the cues its store reported"
    names = [c.name for c in backend.iter_cues()]
    assert len(names) == len(set(names)), "a cue was merged twice"
    engine.erasure.flush()  # the forgets' erase drops the cues only they held
    in_use = {c for e in kept for c in sessions.cues[e]}
    assert {c.id for c in backend.iter_cues()} == in_use
    _assert_cooccurrence_counts_exact(backend, sessions.cues, in_use)


def _assert_cooccurrence_counts_exact(
    backend: Neo4jBackend, cues: dict[str, list[str]], in_use: set[str]
) -> None:
    """Each CoOccurs strength between two cues still in use counts every acknowledged
    store (forgotten ones too: a forget does not uncount) that had both cues: no
    increment was lost or doubled."""
    want: Counter[tuple[str, str]] = Counter()
    for ids in cues.values():
        want.update(p for p in itertools.permutations(ids, 2) if set(p) <= in_use)
    got = {(c.source_id, c.target_id): c.strength for c in backend.iter_cooccurrences()}
    assert got == {pair: float(n) for pair, n in want.items()}


def test_a_deadlock_is_retried_after_a_short_pause(
    make_backend: Callable[..., Neo4jBackend],
) -> None:
    """Two transactions lock two engrams in opposite orders (which the backend's own
    writes never do): the server aborts one, and ``_transaction`` runs it again."""
    build = GraphBuilder(8)
    backend = make_backend("dora")
    for i in (1, 2):
        backend.add_memory(build.engram(i), [], [])
    both_hold_one = threading.Barrier(2)
    attempts: Counter[str] = Counter()

    def locking(first: str, second: str) -> Callable[[Any], str]:
        def work(tx: Any) -> str:
            attempts[first] += 1
            lock = "MATCH (e:Engram {user: 'dora', id: $id}) SET e.importance = 0.25"
            tx.run(lock, id=first).consume()
            if attempts[first] == 1:
                both_hold_one.wait(timeout=30)
            tx.run(lock, id=second).consume()
            return first

        return work

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [pool.submit(backend._transaction, locking(a, b))
                for a, b in (("e00001", "e00002"), ("e00002", "e00001"))]  # fmt: skip
        assert sorted(f.result(timeout=60) for f in done) == ["e00001", "e00002"]
    assert backend.retries[DEADLOCK] == 1
    assert sorted(attempts.values()) == [1, 2]
    assert {e.importance for e in backend.get_engrams(["e00001", "e00002"])} == {0.25}


def test_a_read_meeting_the_unexpected_error_is_run_again(
    make_backend: Callable[..., Neo4jBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neo4j's GQL status 50N42 ("Unexpected error") can end a read that a concurrent
    forget disturbs; the read is run again, and an error of another kind is not."""
    from neo4j.exceptions import Neo4jError

    build = GraphBuilder(8)
    backend = make_backend("erin")
    backend.add_memory(build.engram(1, content="kiwi orchard"), [], [])
    real = backend.driver.execute_query
    planned = ["50N42", "50N42"]  # the statuses the next full-text reads fail with

    def flaky(statement: Any, *args: Any, **kwargs: Any) -> Any:
        if planned and "fulltext" in getattr(statement, "text", statement):  # reads are Query
            status = planned.pop(0)
            info = {"message": f"{status} injected", "description": "injected"}
            raise Neo4jError._hydrate_gql(gql_status=status, diagnostic_record={}, **info)
        return real(statement, *args, **kwargs)

    monkeypatch.setattr(backend.driver, "execute_query", flaky)
    assert [i for i, _ in backend.seek(Seek(k=3, text="kiwi")).text] == ["e00001"]
    assert planned == [] and backend.retries["Neo.DatabaseError.General.UnknownError"] == 2
    planned.append("42N01")
    with pytest.raises(BackendError, match="42N01 injected"):
        backend.seek(Seek(k=3, text="kiwi"))


def test_a_deadlock_after_a_long_lock_wait_is_still_retried(
    make_backend: Callable[..., Neo4jBackend],
) -> None:
    """The retry time counts from the first failure, not from the call: an attempt that
    waited for locks longer than ``retry_seconds`` before the server chose it as a
    deadlock victim (as under twenty sessions on a loaded machine) is run again, and a
    second quick failure is retried too, within ``retry_seconds`` of the first."""
    from neo4j.exceptions import Neo4jError

    backend = make_backend("fay", retry_seconds=0.5)
    waits = [1.0, 0.0]  # the first attempt waits longer than retry_seconds

    def attempt(session: Any) -> str:
        if waits:
            time.sleep(waits.pop(0))
            raise Neo4jError._hydrate_neo4j(code=DEADLOCK, message="injected deadlock")
        return str(session.run("RETURN 'done' AS x").single()["x"])

    assert backend._retrying(attempt) == "done"
    assert backend.retries[DEADLOCK] == 2
