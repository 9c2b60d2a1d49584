"""Time ``smriti migrate``: a Kùzu store of ``--size`` synthetic memories moved to LadybugDB.

Builds the Kùzu store in a child process (bench/corpus.py, lexical vectors, bulk import,
as bench/start.py does), then runs the real ``smriti migrate --to ladybug --json`` on it
(its export and import run in children of their own, one engine each) and reports the
time, the counts and whether the canonical hash of the LadybugDB copy equals the Kùzu
store's, which ``smriti hash`` then computes again from the moved store.

    uv run python bench/migrate.py [--size 100k]

Results: JSON on stdout and in bench/results/migrate-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import configure_logging, machine, plugin_manager, write_results  # noqa: E402

USER = "migratebench"


def settings_env(store: Path, db_type: str) -> dict[str, str]:
    return {
        "ACCESSING_USER": USER, "STORAGE_LOCATION": str(store), "DB_TYPE": db_type,
        "SMRITI_EMBEDDER": "lexical", "SMRITI_CUE_EXTRACTOR": "heuristic",
        "CONSOLIDATION_INTERVAL": "0", "BACKUP_TYPE": "none", "SMRITI_OWNER": "off",
        "LOG_LEVEL": "warning",
    }  # fmt: skip


def build(store: Path, size: int) -> dict:
    """In this process (which then holds Kùzu): generate and bulk-import the corpus."""
    import corpus
    from engine import bulk_import

    from smriti.config import Settings
    from smriti.default_plugins.lexical_embedder import LexicalEmbedder
    from smriti.engine.core import Engine

    settings = Settings.from_env(settings_env(store, "kuzu"))
    with Engine.from_settings(settings, plugin_manager()) as engine:
        records = corpus.records(corpus.memories(size), LexicalEmbedder())
        return bulk_import(engine.backend, records)


def smriti(store: Path, *args: str) -> dict:
    env = {**os.environ, **settings_env(store, "auto")}
    command = [str(Path(sys.executable).parent / "smriti"), *args, "--json"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"smriti {' '.join(args)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="100k")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("warning")
    size = int(float(args.size[:-1]) * 1000) if args.size.endswith("k") else int(args.size)
    with tempfile.TemporaryDirectory(prefix="smriti-migrate-") as tmp:
        store = Path(tmp)
        imported = build(store, size)
        before = smriti(store, "hash")
        began = time.perf_counter()
        report = smriti(store, "migrate", "--to", "ladybug")
        seconds = time.perf_counter() - began
        after = smriti(store, "hash")
        sizes = {p.name: p.stat().st_size for p in (store / USER).glob("memory.*") if p.is_file()}
    result = {
        "size": size, "import": imported, "migrate_s": round(seconds, 1),
        "counts": report["counts"], "hash_before": before["canonical_hash"],
        "hash_reported": report["canonical_hash"], "hash_after": after["canonical_hash"],
        "hash_equal": before["canonical_hash"] == report["canonical_hash"]
        == after["canonical_hash"], "engine_after": report["target"], "file_bytes": sizes,
    }  # fmt: skip
    print(json.dumps(result, indent=2))
    print(f"results: {write_results('migrate', {'machine': machine(), **result}, args.out)}")


if __name__ == "__main__":
    main()
