"""Recall and store latency of one imported store, with and without the core's working set.

``bench/engine.py`` imports a fresh corpus for every configuration; at 100,000 memories
a server backend's import takes minutes, so this script imports once and then measures
the same store twice, through the Engine as ``bench/engine.py`` does (same corpus, same
queries, same precomputed store embeddings, latencies of recall mode ``recall`` limit 10
and of the whole store pipeline):

1. ``native``: ``SMRITI_WORKING_SET=off``, every read goes to the database (several
   Smriti servers sharing it);
2. ``working set``: ``SMRITI_WORKING_SET=on``, one Smriti server as the only writer,
   recall answered from the core's working set once it is loaded (stores still go to
   the database).

Works for any backend ``bench/servers.py`` knows (``neo4j``, ``falkordb``)::

    uv run --all-packages --all-extras python plugins/smriti-backend-neo4j/bench/modes.py \\
        --backend neo4j --size 100k --start-servers

Results: a table on stdout and JSON in bench/results/modes-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import corpus  # noqa: E402
from common import configure_logging, machine, plugin_manager, table, timed, write_results  # noqa: E402
from engine import bulk_import, latencies, parse_size, store_latencies, wait_for_working_set  # noqa: E402
from servers import Servers  # noqa: E402

from smriti.config import Settings  # noqa: E402
from smriti.default_plugins.lexical_embedder import LexicalEmbedder  # noqa: E402
from smriti.engine.core import Engine  # noqa: E402

MODES = (("native", "off"), ("working set", "on"))


def environment(backend: str, size: int, server_env: dict[str, str], tmp: str) -> dict[str, str]:
    """The settings of every phase: one user and graph for this run."""
    return {
        **os.environ,
        **server_env,
        "ACCESSING_USER": f"modes{size}_{uuid.uuid4().hex[:6]}",
        "STORAGE_LOCATION": tmp,
        "DB_TYPE": backend,
        "SMRITI_EMBEDDER": "lexical",
        "SMRITI_CUE_EXTRACTOR": "heuristic",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "FALKOR_GRAPH": f"modes_{uuid.uuid4().hex[:8]}",
    }


def import_store(env: dict[str, str], size: int) -> dict[str, Any]:
    """Bulk-import the corpus (precomputed vectors) and build the native indexes."""
    records = corpus.records(corpus.memories(size), LexicalEmbedder())
    engine = Engine.from_settings(Settings.from_env({**env, "SMRITI_WORKING_SET": "off"}),
                                  plugin_manager()).open()  # fmt: skip
    try:
        figures = bulk_import(engine.backend, records)
        _, figures["index_s"] = timed(lambda: engine.backend.ensure_indexes(384, 0))
    finally:
        engine.close()
    return figures


def measure(env: dict[str, str], mode: str, extra: list[Any], args: argparse.Namespace) -> dict:
    """Recall and store latencies through an Engine with ``SMRITI_WORKING_SET=mode``."""
    settings = Settings.from_env({**env, "SMRITI_WORKING_SET": mode})
    engine = Engine.from_settings(settings, plugin_manager()).open()
    try:
        row: dict[str, Any] = {"working_set_s": wait_for_working_set(engine.backend)}
        queries = corpus.queries(args.queries)
        for q in queries[:5]:  # warm caches and query plans
            engine.recall(q, limit=10)
        row["recall"] = latencies(lambda q: engine.recall(q, limit=10), queries)
        row["embed"], row["store"], _ = store_latencies(engine, extra)
        return row
    finally:
        engine.close()


def main() -> None:
    """Import once, measure both modes, print and save the results."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--backend", default="neo4j")
    p.add_argument("--size", default="10k")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--stores", type=int, default=100, help="store calls per mode")
    p.add_argument("--start-servers", action="store_true")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--log-level", default="warning")
    args = p.parse_args()
    configure_logging(args.log_level)
    size = parse_size(args.size)
    servers = Servers(start=args.start_servers)
    rows: list[dict[str, Any]] = []
    try:
        server_env = servers.environment(args.backend)
        if server_env is None:
            raise SystemExit(f"{args.backend}: server not reachable (try --start-servers)")
        with tempfile.TemporaryDirectory(prefix="smriti-modes-") as tmp:
            env = environment(args.backend, size, server_env, tmp)
            imported = import_store(env, size)
            extra = corpus.memories(size + len(MODES) * args.stores)[size:]
            for i, (label, mode) in enumerate(MODES):
                chunk = extra[i * args.stores : (i + 1) * args.stores]
                rows.append({"mode": label, **measure(env, mode, chunk, args)})
    finally:
        servers.stop()
    headers = ["mode", "recall p50", "recall p95", "store p50", "store p95", "ws load s"]
    body = [[r["mode"], r["recall"]["p50_ms"], r["recall"]["p95_ms"], r["store"]["p50_ms"],
             r["store"]["p95_ms"], r["working_set_s"]] for r in rows]  # fmt: skip
    print(f"{args.backend} at {size}: import {imported['memories_per_s']} memories/s "
          f"({imported['seconds']} s), vector indexes {imported['index_s']:.1f} s")  # fmt: skip
    print(table(headers, body))
    payload = {"machine": machine(), "args": vars(args), "import": imported, "rows": rows,
               "server_settings": servers.settings}  # fmt: skip
    print(f"results: {write_results('modes', payload, args.out)}")


if __name__ == "__main__":
    main()
