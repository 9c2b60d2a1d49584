"""The owner process: concurrent recall throughput, and clients through owner kills.

1. Throughput. A Kùzu store of ``--size`` memories (the engine benchmark's corpus,
   bulk-imported, lexical embedder) is recalled for ``--seconds`` by 1, 4 and 16
   concurrent streams, each a thread with its own connection to the owner process, as
   several MCP servers would be; and, beside it in the same run, by one stream on an
   engine opened in this process (no owner, no socket).
2. Kills. ``--kill-rounds`` runs of the mixed workload of ``smriti.testing.owner_load``
   (three stdio servers driven by the MCP SDK client plus CLI commands, 1,000 calls)
   while the owner is SIGKILLed at random points: kills, calls, errors, lost and
   duplicated memories, and how long the clients waited for an answer after a kill.

    uv run python bench/owner.py                       # 10k store, 10 s per level, 3 kill rounds
    uv run python bench/owner.py --size 1k --seconds 3 --kill-rounds 1

Results: tables on stdout and JSON in bench/results/owner-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import configure_logging, latency_summary, machine, table, write_results  # noqa: E402
from engine import parse_size, run_phase, store_env  # noqa: E402

STREAMS = (1, 4, 16)


def recall_streams(
    make: Callable[[], Any], queries: Sequence[str], streams: int, seconds: float
) -> dict[str, Any]:
    """``streams`` threads recalling for ``seconds``, each with its own memory from
    ``make``; total recalls per second and latency."""
    from smriti.requests import RecallRequest

    asks = [RecallRequest.parse(q, limit=10, max_limit=10) for q in queries]
    memories = [make() for _ in range(streams)]
    for memory in memories:  # warm: caches, prepared statements, connections
        memory.run(asks[0])
    latencies: list[list[float]] = [[] for _ in range(streams)]
    stop = time.perf_counter() + seconds

    def loop(n: int) -> None:
        i = n
        while time.perf_counter() < stop:
            started = time.perf_counter()
            memories[n].run(asks[i % len(asks)])
            latencies[n].append(time.perf_counter() - started)
            i += streams

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(streams)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    for memory in memories:
        memory.close()
    done = [x for per in latencies for x in per]
    return {
        "streams": streams,
        "recalls": len(done),
        "recalls_per_s": round(len(done) / elapsed, 1),
        "latency": latency_summary(done),
    }


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    """Every stream count through the owner, and one stream in-process, on one store."""
    import corpus

    from smriti.config import Settings
    from smriti.engine import Engine
    from smriti.owner.client import RemoteService
    from smriti.owner.service import LocalService

    queries = corpus.queries(500)
    out: dict[str, Any] = {"size": args.size, "seconds_per_level": args.seconds}
    with tempfile.TemporaryDirectory(prefix="smriti-owner-bench-") as tmp:
        env = store_env("kuzu", args.size, tmp)
        run_phase("import", args.size, env, args)
        settings = Settings.from_env({**os.environ, **env, "SMRITI_OWNER_IDLE": "30"})

        engine = Engine.from_settings(settings).open()
        try:
            local = recall_streams(lambda: _Shared(LocalService(engine)), queries, 1, args.seconds)
        finally:
            engine.close()
        out["in_process"] = local
        rows = []
        for streams in STREAMS:
            row = recall_streams(
                lambda: RemoteService.connect(settings, "bench"), queries, streams, args.seconds
            )
            row["vs_one_stream"] = 0.0
            rows.append(row)
        for row in rows:
            row["vs_one_stream"] = round(row["recalls_per_s"] / rows[0]["recalls_per_s"], 2)
        out["owner"] = rows
        stopper = RemoteService.existing(settings, "bench")
        if stopper is not None:
            stopper.stop_owner()
            stopper.close()
    return out


class _Shared:
    """A LocalService the stream must not close (the engine is closed once, after)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def run(self, *a: Any, **k: Any) -> Any:
        return self.inner.run(*a, **k)

    def close(self) -> None:
        return None


def kills(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Rounds of the mixed workload while the owner is killed."""
    from smriti.testing.owner_load import run_load

    rounds = []
    for n in range(args.kill_rounds):
        with tempfile.TemporaryDirectory(prefix="smriti-owner-kill-") as tmp:
            extra = {"SMRITI_EMBEDDER": args.embedder}
            result = run_load(
                Path(tmp) / "store", kill_every=(0.5, 2.5), seed=100 + n, env_extra=extra
            )
            rounds.append(result.to_dict())
            print(f"kill round {n + 1}: {result.to_dict()}", flush=True)
    return rounds


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0, help="per stream count")
    parser.add_argument("--kill-rounds", type=int, default=3)
    parser.add_argument(
        "--embedder",
        default="lexical",
        help="embedder of the kill rounds: lexical (no model), or local (the pinned "
        "model, which each new owner loads again: it must be in the model cache, or set "
        "SMRITI_LOCAL_MODEL)",
    )
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    payload: dict[str, Any] = {"machine": machine()}
    payload["throughput"] = speed = throughput(args)
    print(f"recall throughput on a {args.size:,}-memory Kùzu store:")
    rows = [
        (
            "in-process, 1",
            speed["in_process"]["recalls_per_s"],
            "-",
            speed["in_process"]["latency"]["p50_ms"],
        )
    ]
    rows += [
        (f"owner, {r['streams']}", r["recalls_per_s"], r["vs_one_stream"], r["latency"]["p50_ms"])
        for r in speed["owner"]
    ]
    print(table(("STREAMS", "RECALLS/S", "VS 1 STREAM", "P50 MS"), rows))
    payload["kills"] = kills(args)
    payload["kill_embedder"] = args.embedder
    path = write_results("owner", payload)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
