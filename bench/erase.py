"""Forget-erase benchmark: how long a forget takes now that it erases, per store size.

Builds a store of N generated memories (bench/corpus.py, bulk-imported), stores one
memory holding a unique token through the Engine, reopens the store (the forget then
runs in a fresh session, as after a restart), forgets it and reports:

- ``forget_s``: the whole ``Engine.forget`` (delete, tombstone, orphaned cues and the
  erase: for Kùzu a checkpoint and a rebuild of the database file from an export of
  its live rows; for SQLite a TRUNCATE checkpoint);
- ``db_mb``: the store's database file after the erase;
- ``token_files``: files under the store still holding the token (must be 0).

Usage: ``uv run --all-packages --all-extras python bench/erase.py --sizes 1000 10000
--backends kuzu sqlite``. Results go to ``bench/results/erase-*.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402
from common import configure_logging, machine, plugin_manager, table, timed  # noqa: E402
from engine import bulk_import  # noqa: E402


def holding(root: Path, token: str) -> int:
    """How many files under ``root`` hold ``token`` (any case)."""
    needle = token.lower().encode()
    return sum(1 for p in root.rglob("*") if p.is_file() and needle in p.read_bytes().lower())


def run(backend: str, size: int, records: Any) -> dict[str, Any]:
    from smriti.config import Settings
    from smriti.engine.core import Engine

    home = Path(tempfile.mkdtemp(prefix="smriti-erase-"))
    env = {
        **os.environ,
        "STORAGE_LOCATION": str(home),
        "ACCESSING_USER": "bench",
        "DB_TYPE": backend,
        "SMRITI_EMBEDDER": "lexical",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
    }
    settings = Settings.from_env(env)
    pm = plugin_manager()
    token = "Zq" + uuid.uuid4().hex[:12] + "Vx"
    try:
        with Engine.from_settings(settings, pm) as engine:
            bulk_import(engine.backend, records)
            secret = engine.store(f"the vault word is {token}").engram.id
        with Engine.from_settings(settings, pm) as engine:
            _, forget_s = timed(lambda: engine.forget(secret))
            still = holding(home, token)
            db = max((p for p in home.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
            return {
                "backend": backend,
                "memories": size,
                "forget_s": round(forget_s, 3),
                "db_mb": round(db.stat().st_size / 2**20, 1),
                "token_files": still,
            }
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    from common import write_results

    from smriti.default_plugins.lexical_embedder import LexicalEmbedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--backends", nargs="+", default=["kuzu", "sqlite"])
    args = parser.parse_args()
    configure_logging()
    rows = []
    for size in args.sizes:
        records = corpus.records(corpus.memories(size), LexicalEmbedder())
        for backend in args.backends:
            rows.append(run(backend, size, records))
            print(rows[-1], flush=True)
    headers = ["backend", "memories", "forget_s", "db_mb", "token_files"]
    print(table(headers, [[r[h] for h in headers] for r in rows]))
    path = write_results("erase", {"machine": machine(), "rows": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
