"""Neo4j under concurrent load: many sessions of mixed calls on one user's memory.

A server process keeps one Engine per user and every MCP session of that user calls it
from its own thread; this benchmark does the same: ``--threads`` sessions (default 20)
share one Engine and run ``--calls`` mixed calls (store / recall / forget / stats) on a
user whose store already holds ``--preload`` memories (past the vector-index threshold).
``--processes P`` runs P such server processes on the same user at once (the calls and
sessions split between them), which is what several servers on one database look like.

It prints failures, transient-error retries (deadlocks and others, with the node each
deadlock was on), store and recall p50/p99, checks that every acknowledged store is
present and every forgotten memory gone, and writes JSON to ``bench/results/``.

``--compare REV`` runs the same workload first with the backend as it was at git
revision REV (checked out into a worktree under /tmp; only the backend package is
swapped, through ``PYTHONPATH``), then with the current one, against the same server, so
a noisy machine affects both alike.

    python plugins/smriti-backend-neo4j/bench/concurrency.py --start-server
    python plugins/smriti-backend-neo4j/bench/concurrency.py --start-server --compare HEAD~1
    NEO4J_URI=bolt://127.0.0.1:7687 NEO4J_PASSWORD=... python .../concurrency.py

Not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import queue
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent
REPO = PLUGIN.parent.parent
RESULTS = HERE / "results"
MIX = {"store": 0.35, "recall": 0.45, "forget": 0.10, "stats": 0.10}
RECALL_MODES = (("recall", 0.7), ("search", 0.15), ("list", 0.15))
TAGS = ("work", "family", "health", "travel", "project", "todo")
LOCK_RE = re.compile(r"\b(NODE|RELATIONSHIP|INDEX_ENTRY|RELATIONSHIP_GROUP)[A-Z_]*\((\d+)\)")


@dataclass
class Call:
    """One call of the workload."""

    kind: str
    arg: Any = None


@dataclass
class Tally:
    """What one process saw."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    retries: Counter[str] = field(default_factory=Counter)
    locks: Counter[str] = field(default_factory=Counter)
    wall: float = 0.0


class RetryLog(logging.Handler):
    """Counts the driver's 'will be retried' warnings and the locks named in them."""

    def __init__(self, tally: Tally) -> None:
        super().__init__(logging.WARNING)
        self.tally = tally

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "will be retried" in message:
            code = re.search(r"Neo\.\w+\.\w+\.\w+", message)
            self.tally.retries[code.group(0) if code else "other"] += 1
            note_locks(self.tally, message)


def note_locks(tally: Tally, message: str) -> None:
    """Count the lock resources a deadlock message names (the first is the one waited on)."""
    found = LOCK_RE.findall(message)
    if found:
        kind, ident = found[0]
        tally.locks[f"{kind}({ident})"] += 1


def workload(calls: int, seed: int) -> list[Call]:
    """A deterministic mix of calls; stores carry their text, recalls their query."""
    sys.path.insert(0, str(REPO / "bench"))
    import corpus

    rng = random.Random(seed)
    texts = iter(corpus.memories(calls + 1, seed=seed + 1))
    queries = iter(corpus.queries(calls + 1, seed=seed + 2))
    kinds = rng.choices(list(MIX), weights=list(MIX.values()), k=calls)
    out = []
    for kind in kinds:
        if kind == "store":
            tags = ",".join(rng.sample(TAGS, k=rng.randint(0, 2)))
            out.append(Call(kind, (next(texts).text, round(rng.random(), 2), tags)))
        elif kind == "recall":
            mode = rng.choices([m for m, _ in RECALL_MODES], [w for _, w in RECALL_MODES])[0]
            out.append(Call(kind, (next(queries), mode)))
        else:
            out.append(Call(kind))
    return out


def settings_env(user: str, uri: str, password: str) -> dict[str, str]:
    """Zero-config engine settings on the given Neo4j server."""
    return {
        "ACCESSING_USER": user,
        "STORAGE_LOCATION": tempfile.gettempdir(),
        "DB_TYPE": "neo4j",
        "NEO4J_URI": uri,
        "NEO4J_USERNAME": os.environ.get("NEO4J_USERNAME", "neo4j"),
        "NEO4J_PASSWORD": password,
        "SMRITI_EMBEDDER": "lexical",
        "SMRITI_CUE_EXTRACTOR": "heuristic",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_SYNC_INTERVAL": "0",
        "BACKUP_TYPE": "none",
    }


def open_engine(env: dict[str, str]) -> Any:
    """An opened Engine with the installed plugins (the backend from ``PYTHONPATH``)."""
    from smriti.config import Settings
    from smriti.engine.core import Engine
    from smriti.plugins import create_plugin_manager

    pm, _ = create_plugin_manager(load_entry_points=True, environ={})
    return Engine.from_settings(Settings.from_env(env), pm).open()


def preload(env: dict[str, str], count: int, seed: int) -> list[str]:
    """Store ``count`` memories one by one (so the vector indexes exist); their ids."""
    sys.path.insert(0, str(REPO / "bench"))
    import corpus

    engine = open_engine(env)
    try:
        items = corpus.memories(count, seed=seed + 100)
        tags = [TAGS[i % len(TAGS)] for i in range(count)]
        return [engine.store(m.text, 0.5, t).engram.id for m, t in zip(items, tags, strict=True)]
    finally:
        engine.close()


def run_process(
    env: dict[str, str], calls: list[Call], threads: int, victims: list[str], think: float
) -> Tally:
    """One server process: one Engine, ``threads`` sessions draining ``calls``, each
    pausing a random 0-2x ``think`` seconds after a call (0: back to back)."""
    tally = Tally()
    logging.getLogger("neo4j").addHandler(RetryLog(tally))
    capture_backend_retries(tally)
    engine = open_engine(env)
    todo: queue.Queue[Call] = queue.Queue()
    for call in calls:
        todo.put(call)
    pool = list(victims)
    lock = threading.Lock()

    def session() -> None:
        while True:
            try:
                call = todo.get_nowait()
            except queue.Empty:
                return
            run_call(engine, call, tally, pool, lock)
            if think:
                time.sleep(random.uniform(0, 2 * think))

    started = time.perf_counter()
    workers = [threading.Thread(target=session) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    tally.wall = time.perf_counter() - started
    retries = getattr(engine.backend, "retries", None)
    if retries is not None:  # a backend that retries itself counts its retries
        tally.retries = Counter(retries)
    engine.close()
    return tally


def capture_backend_retries(tally: Tally) -> None:
    """Note the locks named by the backend's own 'transaction retried' log events."""
    import structlog

    def processor(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
        if "retried" in str(event.get("event", "")):
            note_locks(tally, str(event.get("error", "")))
            raise structlog.DropEvent
        return event

    config = structlog.get_config()
    structlog.configure(processors=[processor, *config["processors"]])


def run_call(engine: Any, call: Call, tally: Tally, pool: list[str], lock: threading.Lock) -> None:
    """Run one call, timing it; failures are recorded, never raised."""
    started = time.perf_counter()
    victim = None
    try:
        if call.kind == "store":
            text, importance, tags = call.arg
            stored = engine.store(text, importance, tags or None)
            with lock:
                tally.stored.append(stored.engram.id)
                pool.append(stored.engram.id)
        elif call.kind == "recall":
            engine.recall(call.arg[0], 5, call.arg[1])
        elif call.kind == "forget":
            with lock:
                victim = pool.pop(random.randrange(len(pool))) if pool else None
            if victim is not None:
                engine.forget(victim)
                with lock:
                    tally.forgotten.append(victim)
        else:
            engine.stats()
    except Exception as exc:  # a failed call is a figure, not a crash
        where = traceback.extract_tb(exc.__traceback__)[-1]
        tally.failures.append(
            f"{call.kind}: {type(exc).__name__}: {str(exc)[:300]} "
            f"(at {Path(where.filename).name}:{where.lineno})"
        )
        return
    with lock:
        tally.seconds.setdefault(call.kind, []).append(time.perf_counter() - started)


def worker_main(args: argparse.Namespace) -> dict[str, Any]:
    """One variant: preload a fresh user, run the workload, verify, summarise."""
    user = f"bench-{uuid.uuid4().hex[:8]}"
    env = settings_env(user, args.uri, args.password)
    if args.wipe:
        wipe(args)
    victims = preload(env, args.preload, args.seed)
    calls = workload(args.calls, args.seed)
    shares = [calls[i :: args.processes] for i in range(args.processes)]
    victim_shares = [victims[i :: args.processes] for i in range(args.processes)]
    threads = max(1, args.threads // args.processes)
    if args.processes == 1:
        tallies = [run_process(env, shares[0], threads, victim_shares[0], args.think)]
    else:
        with ProcessPoolExecutor(args.processes) as pool:
            futures = [
                pool.submit(run_process, env, share, threads, vs, args.think)
                for share, vs in zip(shares, victim_shares, strict=True)
            ]
            tallies = [f.result() for f in futures]
    tally = merge(tallies)
    missing, lingering = verify(env, tally)
    return summarise(args, tally, missing, lingering, hot_nodes(args, tally))


def wipe(args: argparse.Namespace) -> None:
    """Delete every node and vector index, so each run starts from the same database."""
    import neo4j

    with neo4j.GraphDatabase.driver(args.uri, auth=("neo4j", args.password)) as driver:
        with driver.session() as session:
            session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS").consume()
        for record in driver.execute_query("SHOW VECTOR INDEXES YIELD name").records:
            driver.execute_query(f"DROP INDEX `{record['name'].replace('`', '``')}` IF EXISTS")


def merge(tallies: list[Tally]) -> Tally:
    """One tally from several processes (wall time: the slowest)."""
    out = Tally()
    for t in tallies:
        for kind, values in t.seconds.items():
            out.seconds.setdefault(kind, []).extend(values)
        out.failures += t.failures
        out.stored += t.stored
        out.forgotten += t.forgotten
        out.retries.update(t.retries)
        out.locks.update(t.locks)
        out.wall = max(out.wall, t.wall)
    return out


def verify(env: dict[str, str], tally: Tally) -> tuple[int, int]:
    """How many acknowledged stores are missing, and how many forgotten ones remain."""
    engine = open_engine(env)
    try:
        gone = set(tally.forgotten)
        kept = [i for i in tally.stored if i not in gone]
        found = {e.id for e in engine.backend.get_engrams(kept)}
        lingering = engine.backend.get_engrams(list(gone))
        return len(set(kept) - found), len(lingering)
    finally:
        engine.close()


def hot_nodes(args: argparse.Namespace, tally: Tally) -> list[dict[str, Any]]:
    """The nodes (and relationships) deadlocks waited on most, with what they are."""
    import neo4j

    top = tally.locks.most_common(8)
    ids = [int(key.split("(")[1].rstrip(")")) for key, _ in top if key.startswith("NODE")]
    found: dict[int, str] = {}
    if ids:
        with neo4j.GraphDatabase.driver(args.uri, auth=("neo4j", args.password)) as driver:
            records = driver.execute_query(
                "MATCH (n) WHERE id(n) IN $ids "
                "RETURN id(n) AS i, labels(n)[0] AS label, coalesce(n.key, n.id) AS name, "
                "COUNT { (n)--() } AS degree",
                ids=ids,
            ).records
        found = {r["i"]: f"{r['label']} {r['name']!r} (degree {r['degree']})" for r in records}
    return [
        {"lock": key, "deadlocks": n, "node": found.get(_node_id(key), "(gone or not a node)")}
        for key, n in top
    ]


def _node_id(key: str) -> int:
    return int(key.split("(")[1].rstrip(")")) if key.startswith("NODE") else -1


def summarise(
    args: argparse.Namespace, tally: Tally, missing: int, lingering: int, hot: list[dict[str, Any]]
) -> dict[str, Any]:
    """The JSON result of one variant."""

    def pct(kind: str, q: float) -> float:
        values = tally.seconds.get(kind, [])
        return round(float(np.percentile(values, q)) * 1000, 1) if values else float("nan")

    calls = {k: len(v) for k, v in tally.seconds.items()}
    return {
        "variant": args.variant,
        "calls": args.calls,
        "threads": args.threads,
        "processes": args.processes,
        "preload": args.preload,
        "think_s": args.think,
        "ok_calls": calls,
        "failures": len(tally.failures),
        "failure_samples": tally.failures[:5],
        "retries": sum(tally.retries.values()),
        "retries_by_code": dict(tally.retries),
        "hot_locks": hot,
        "missing_stores": missing,
        "lingering_forgets": lingering,
        "wall_s": round(tally.wall, 1),
        "throughput_calls_s": round(sum(calls.values()) / tally.wall, 1) if tally.wall else 0,
        **{f"{k}_p{q}_ms": pct(k, q) for k in ("store", "recall", "forget") for q in (50, 99)},
    }


# -- orchestration ---------------------------------------------------------------------------
def run_variant(
    args: argparse.Namespace, variant: str, backend_path: Path | None, processes: int
) -> dict[str, Any]:
    """Run one variant in a fresh interpreter (so old and new code never mix)."""
    env = dict(os.environ)
    if backend_path is not None:  # the worktree's backend package shadows the installed one
        paths = [str(backend_path), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    cmd = [
        sys.executable, __file__, "--worker", "--variant", variant, "--uri", args.uri,
        "--password", args.password, "--calls", str(args.calls), "--threads", str(args.threads),
        "--processes", str(processes), "--preload", str(args.preload), "--seed", str(args.seed),
        "--think", str(args.think), *(["--wipe"] if args.wipe else []),
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"variant {variant} failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def worktree(rev: str) -> Path:
    """The backend package as it was at ``rev``, in a git worktree under /tmp."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    path = Path(tempfile.gettempdir()) / f"smriti-neo4j-bench-{commit}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit],
            check=True, capture_output=True,
        )  # fmt: skip
    return path / "plugins" / "smriti-backend-neo4j"


def start_server() -> tuple[Any, str, str]:
    """The plugin's test server (Maven Central jars), started for this run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "smriti_neo4j_test_server", PLUGIN / "tests" / "neo4j_server" / "server.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    home = Path(tempfile.mkdtemp(prefix="smriti-neo4j-bench-"))
    server = module.start(home, quick_jit=False)  # full JIT, as a production server runs
    return server, server.uri, server.password


COLUMNS = (
    ("variant", "variant"), ("processes", "proc"), ("think_s", "think s"), ("failures", "failures"),
    ("retries", "retries"), ("missing_stores", "missing"), ("lingering_forgets", "lingering"),
    ("store_p50_ms", "store p50"), ("store_p99_ms", "store p99"),
    ("recall_p50_ms", "recall p50"), ("recall_p99_ms", "recall p99"),
    ("forget_p99_ms", "forget p99"), ("wall_s", "wall s"), ("throughput_calls_s", "calls/s"),
)  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of the headline figures."""
    head = "| " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    body = ["| " + " | ".join(str(r[key]) for key, _ in COLUMNS) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def main(argv: list[str] | None = None) -> int:
    """Parse arguments; run the variants (or, with ``--worker``, one of them)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--processes", default="1", help="comma-separated: one run per value")
    parser.add_argument("--preload", type=int, default=120)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="mean seconds a session pauses between calls (default 0)",
    )
    parser.add_argument(
        "--wipe",
        action="store_true",
        help="empty the database before each run (implied by --start-server)",
    )
    parser.add_argument("--compare", metavar="REV", help="also run the backend at git REV")
    parser.add_argument("--start-server", action="store_true")
    parser.add_argument("--uri", default=os.environ.get("NEO4J_URI", ""))
    parser.add_argument("--password", default=os.environ.get("NEO4J_PASSWORD", ""))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="current", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        args.processes = int(args.processes)
        print(json.dumps(worker_main(args)))
        return 0
    server = None
    if args.start_server:
        server, args.uri, args.password = start_server()
        args.wipe = True
    if not args.uri:
        parser.error("give --uri (or NEO4J_URI), or --start-server")
    try:
        rows = run_all(args, lambda line: print(line, file=sys.stderr, flush=True))
    finally:
        if server is not None:
            server.stop()
    print(table(rows))
    for row in rows:
        if row["hot_locks"]:
            print(f"\n{row['variant']} x{row['processes']}: deadlocks waited on")
            for lock in row["hot_locks"]:
                print(f"  {lock['deadlocks']:4d}  {lock['lock']:24s} {lock['node']}")
    write_json(args, rows)
    return 0 if all(r["failures"] == 0 for r in rows if r["variant"] == "current") else 1


def run_all(args: argparse.Namespace, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every requested (variant, processes) run, old before new for each layout."""
    variants: list[tuple[str, Path | None]] = [("current", None)]
    if args.compare:
        variants.insert(0, (f"at {args.compare}", worktree(args.compare)))
    rows = []
    for processes in [int(p) for p in str(args.processes).split(",")]:
        for name, path in variants:
            say(f"running {name} with {processes} process(es) ...")
            rows.append(run_variant(args, name, path, processes))
    return rows


def write_json(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """Write the run to ``bench/results/concurrency-<UTC time>.json``."""
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"concurrency-{stamp}.json"
    meta = {
        "command": " ".join(sys.argv),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "python": platform.python_version(),
        "compare": args.compare,
    }
    path.write_text(json.dumps({"meta": meta, "runs": rows}, indent=2) + "\n")
    print(f"\nwrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    raise SystemExit(main())
