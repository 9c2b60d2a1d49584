"""Several machines backing up one user to one remote: do they lose or resurrect memories?

Real engines on Kùzu (lexical embedder, heuristic cues), one bare git repository or one
moto S3 bucket (127.0.0.1) per run. Cases:

- ``stale``: the tester's report. Machine 1 stores 50 and syncs; machine 2 restores,
  stores 10 and syncs; machine 1 (stale) stores 10 more and syncs. A fresh restore
  must hold 70.
- ``random``: three machines, a seeded random interleaving of stores, forgets (of a
  memory that machine holds), recalls and syncs, then two sync rounds.
- ``parallel``: two machines in two threads, each storing and syncing in a loop at
  the same time, so pushes really race, then two sync rounds.
- ``large`` (only when asked for): the ``stale`` case on a store of
  ``--large-memories`` synthetic memories (bench/corpus.py); ``merge_sync_s`` is the
  stale machine's sync, which merges the other machine's snapshot.

After every run a fresh machine restores; checked: every acknowledged memory (``store``
returned) that was not forgotten is there ("lost" counts those missing), no forgotten
one is ("resurrected"), and all machines and the restore have one canonical hash. A run
fails on any of these or on a sync error.

    uv run python bench/backup_merge.py --runs 5
    uv run python bench/backup_merge.py --providers git --cases random --runs 20

Prints a Markdown table and writes JSON to bench/results/backup-merge-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backup import git_overrides, make_engine, populate, s3_overrides  # noqa: E402
from common import configure_logging, machine, table, write_results  # noqa: E402

from smriti.backup import SnapshotConflict  # noqa: E402
from smriti.portable import canonical_hash  # noqa: E402
from smriti.testing.backup_suite import memory_texts  # noqa: E402


class Ledger:
    """What the machines were told: acknowledged stores and forgets, sync times."""

    def __init__(self) -> None:
        self.texts = iter(memory_texts(10_000))
        self.stored: set[str] = set()
        self.forgotten: set[str] = set()
        self.sync_s: list[float] = []
        self.errors: list[str] = []
        self.races = 0  # pushes refused because another machine pushed first
        self.merge_sync_s: float | None = None
        self.lock = threading.Lock()

    def watch(self, engine: Any) -> Any:
        """Count the engine's lost push races (its provider's SnapshotConflicts)."""
        real = engine.backup.push_if

        def counted(snapshot: Path, fetched: Any) -> Any:
            try:
                return real(snapshot, fetched)
            except SnapshotConflict:
                with self.lock:
                    self.races += 1
                raise

        engine.backup.push_if = counted
        return engine

    def store(self, engine: Any) -> str:
        with self.lock:
            text = next(self.texts)
        memory_id = engine.store(text).engram.id
        with self.lock:
            self.stored.add(memory_id)
        return str(memory_id)

    def forget(self, engine: Any, memory_id: str) -> None:
        engine.forget(memory_id)
        with self.lock:
            self.forgotten.add(memory_id)

    def sync(self, engine: Any) -> None:
        started = time.perf_counter()
        try:
            engine.sync()
        except Exception as exc:  # a run with a failed sync is a failed run
            self.errors.append(f"{type(exc).__name__}: {exc}")
        self.sync_s.append(time.perf_counter() - started)


def stale(engines: list[Any], ledger: Ledger, rng: random.Random) -> None:
    one, two = engines[0], engines[1]
    for _ in range(50):
        ledger.store(one)
    ledger.sync(one)
    ledger.sync(two)  # machine 2 "restores": its store was empty, the sync merges
    for _ in range(10):
        ledger.store(two)
    ledger.sync(two)
    for _ in range(10):
        ledger.store(one)
    ledger.sync(one)


def interleaved(engines: list[Any], ledger: Ledger, rng: random.Random) -> None:
    for _ in range(40):
        engine = rng.choice(engines)
        roll = rng.random()
        if roll < 0.55:
            ledger.store(engine)
        elif roll < 0.7:
            mine = sorted(e.id for e in engine.backend.iter_engrams())
            if mine:
                ledger.forget(engine, rng.choice(mine))
        elif roll < 0.8:
            engine.recall(rng.choice(["espresso coffee", "jazz concert", "sailing wind"]))
        else:
            ledger.sync(engine)


def parallel(engines: list[Any], ledger: Ledger, rng: random.Random) -> None:
    def work(engine: Any) -> None:
        for _ in range(8):
            ledger.store(engine)
            ledger.sync(engine)

    threads = [threading.Thread(target=work, args=(e,)) for e in engines[:2]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def large(engines: list[Any], ledger: Ledger, rng: random.Random) -> None:
    one, two = engines[0], engines[1]
    ledger.stored.update(e.id for e in one.backend.iter_engrams())  # populated before open
    ledger.sync(one)
    ledger.sync(two)
    for _ in range(10):
        ledger.store(two)
    ledger.sync(two)
    for _ in range(10):
        ledger.store(one)
    started = time.perf_counter()
    ledger.sync(one)
    ledger.merge_sync_s = time.perf_counter() - started


CASES: dict[str, tuple[int, Callable[[list[Any], Ledger, random.Random], None]]] = {
    "stale": (2, stale),
    "random": (3, interleaved),
    "parallel": (2, parallel),
    "large": (2, large),
}


def run_once(
    case: str, provider: str, seed: int, work: Path, remote: dict[str, Any], size: int
) -> dict:
    machines, scenario = CASES[case]
    ledger = Ledger()
    if case == "large":
        populate(work / "m0", size)
    engines = [ledger.watch(make_engine(work / f"m{i}", **remote).open()) for i in range(machines)]
    started = time.perf_counter()
    try:
        scenario(engines, ledger, random.Random(seed))
        for _ in range(2):
            for engine in engines:
                ledger.sync(engine)
        hashes = {canonical_hash(e) for e in engines}
    finally:
        for engine in engines:
            engine.close()
    with make_engine(work / "fresh", **remote) as fresh:
        restored = {e.id for e in fresh.backend.iter_engrams()}
        hashes.add(canonical_hash(fresh))
    want = ledger.stored - ledger.forgotten
    lost = len(want - restored)
    back = len(restored & ledger.forgotten)
    return {
        "case": case,
        "provider": provider,
        "seed": seed,
        "stored": len(ledger.stored),
        "forgotten": len(ledger.forgotten),
        "restored": len(restored),
        "lost": lost,
        "resurrected": back,
        "converged": len(hashes) == 1,
        "sync_errors": ledger.errors,
        "syncs": len(ledger.sync_s),
        "races": ledger.races,
        "mean_sync_s": round(sum(ledger.sync_s) / max(1, len(ledger.sync_s)), 3),
        "merge_sync_s": None if ledger.merge_sync_s is None else round(ledger.merge_sync_s, 2),
        "seconds": round(time.perf_counter() - started, 1),
        "failed": bool(lost or back or len(hashes) != 1 or ledger.errors),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per case and provider")
    parser.add_argument("--cases", default="stale,random,parallel")
    parser.add_argument("--providers", default="git,s3")
    parser.add_argument("--large-memories", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    configure_logging("error")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log
    rows: list[dict[str, Any]] = []
    server = None
    try:
        for provider in [p.strip() for p in args.providers.split(",") if p.strip()]:
            for case in [c.strip() for c in args.cases.split(",") if c.strip()]:
                runs = 1 if case in ("stale", "large") else args.runs
                for seed in range(runs):
                    with tempfile.TemporaryDirectory(prefix="smriti-bench-merge-") as tmp:
                        work = Path(tmp)
                        if provider == "git":
                            remote, _ = git_overrides(work)
                        else:
                            if server is None:
                                base, _, server = s3_overrides()
                            bucket = f"smriti-merge-{uuid.uuid4().hex[:10]}"
                            remote = {**base, "s3_bucket": bucket}
                        rows.append(
                            run_once(case, provider, seed, work, remote, args.large_memories)
                        )
                        print(rows[-1], file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    summary = summarise(rows)
    print(table(
        ["case", "provider", "tried", "failures", "acknowledged memories lost", "resurrected",
         "stored", "forgotten", "push races lost (retried)", "sync errors", "mean sync s"],
        [list(r.values()) for r in summary],
    ))  # fmt: skip
    path = write_results("backup-merge", {"machine": machine(), "summary": summary,
                                          "runs": rows}, args.out)  # fmt: skip
    print(f"\nresults: {path}")
    return 1 if any(r["failures"] for r in summary) else 0


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        s = out.setdefault((r["case"], r["provider"]), {
            "case": r["case"], "provider": r["provider"], "tried": 0, "failures": 0,
            "lost": 0, "resurrected": 0, "stored": 0, "forgotten": 0, "races": 0,
            "sync_errors": 0, "sync_s": [],
        })  # fmt: skip
        s["tried"] += 1
        s["failures"] += r["failed"]
        for key in ("lost", "resurrected", "stored", "forgotten", "races"):
            s[key] += r[key]
        s["sync_errors"] += len(r["sync_errors"])
        s["sync_s"].append(r["mean_sync_s"])
    for s in out.values():
        times = s.pop("sync_s")
        s["mean_sync_s"] = round(sum(times) / len(times), 3)
    return list(out.values())


if __name__ == "__main__":
    raise SystemExit(main())
