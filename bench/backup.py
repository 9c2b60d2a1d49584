"""Export, import, backup and restore throughput on Kùzu (SPEC §8).

Builds a store of N synthetic memories (bench/corpus.py, lexical embedder, written with
``import_records`` as the engine would have), then measures:

- ``export``: ``smriti.portable.export_store`` (memories/s, file size, gzip size);
- ``import``: ``import_store`` into a fresh Kùzu store (memories/s), hash checked;
- per backup provider (git: a local bare repository; s3: moto's server on 127.0.0.1):
  first ``Engine.sync()`` (export + upload), an unchanged second sync, the size of the
  backup on the remote, and the restore time of a fresh engine (open on an empty
  store: download + import), with the canonical hash compared to the original.

    uv run python bench/backup.py --memories 10000
    uv run python bench/backup.py --memories 2000 --providers git

Prints a Markdown table and writes JSON to bench/results/backup-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus  # noqa: E402
from common import configure_logging, machine, peak_rss_mb, table, write_results  # noqa: E402

from smriti.config import Settings  # noqa: E402
from smriti.default_plugins.lexical_embedder import LexicalEmbedder  # noqa: E402
from smriti.engine import Engine  # noqa: E402
from smriti.plugins import create_plugin_manager  # noqa: E402
from smriti.portable import canonical_hash, export_store, import_store  # noqa: E402


def make_engine(home: Path, **overrides: Any) -> Engine:
    """An engine on Kùzu under ``home`` with the git and s3 plugins registered."""
    import smriti_backend_kuzu.plugin as kuzu_plugin
    import smriti_backup_git.plugin as git_plugin
    import smriti_backup_s3.plugin as s3_plugin

    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    for module in (kuzu_plugin, git_plugin, s3_plugin):
        pm.register(module)
    values = {
        "accessing_user": "bench",
        "storage_location": str(home),
        "consolidation_interval": 0,
        "backup_sync_interval": 0,
        "embedder": "lexical",
        "cue_extractor": "heuristic",
        **{k: v for k, v in overrides.items() if not k.isupper()},
    }
    # The plugins' own settings (upper case: GIT_BASE_URL, S3_*) come from the environment.
    env = {k: v for k, v in overrides.items() if k.isupper()}
    return Engine.from_settings(Settings.from_env(env, **values), pm)


def populate(home: Path, n: int) -> dict[str, Any]:
    """Write ``n`` synthetic memories with their cues and edges; returns counts."""
    embedder = LexicalEmbedder()
    records = corpus.records(corpus.memories(n), embedder)
    with make_engine(home) as engine:
        backend = engine.backend
        backend.import_records([], records.cues, [], [], [])
        for start in range(0, n, 2000):
            batch = records.engrams[start : start + 2000]
            ids = {e.id for e in batch}
            links = [lk for lk in records.links if lk.engram_id in ids]
            backend.import_records(batch, [], links, [], [])
        backend.import_records([], [], [], records.associations, records.cooccurrences)
        backend.set_meta("embedding_model", embedder.model_id)
        return backend.counts()


def dir_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_portable(work: Path, source: Path, n: int) -> tuple[dict[str, Any], str]:
    """Export and import timings; returns the row and the source's canonical hash."""
    with make_engine(source) as engine:
        want = canonical_hash(engine)
        plain = export_store(engine, work / "export.jsonl", progress=False)
        packed = export_store(engine, work / "export.jsonl.gz", progress=False)
    with make_engine(work / "imported") as target:
        report = import_store(target, work / "export.jsonl", progress=False)
        same = canonical_hash(target) == want
    row = {
        "export_s": round(plain.seconds, 2),
        "export_memories_per_s": round(n / plain.seconds),
        "export_mb": round(plain.bytes / 1e6, 1),
        "export_gz_mb": round(packed.bytes / 1e6, 1),
        "export_gz_s": round(packed.seconds, 2),
        "import_s": round(report.seconds, 2),
        "import_memories_per_s": round(n / report.seconds),
        "hash_equal": same,
    }
    return row, want


def bench_provider(
    name: str,
    overrides: dict[str, Any],
    source: Path,
    work: Path,
    want: str,
    n: int,
    remote_size: Any,
) -> dict[str, Any]:
    """First sync, unchanged sync, remote size and restore time for one provider."""
    home = work / f"{name}-home"
    shutil.copytree(source, home)
    with make_engine(home, **overrides) as engine:
        started = time.perf_counter()
        first = engine.sync()
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        second = engine.sync()
        second_s = time.perf_counter() - started
    fresh = work / f"{name}-restored"
    started = time.perf_counter()
    restored = make_engine(fresh, **overrides).open()
    restore_s = time.perf_counter() - started
    try:
        same = canonical_hash(restored) == want
        count = restored.backend.count_engrams()
    finally:
        restored.close()
    return {
        "provider": name,
        "first_sync_s": round(first_s, 2),
        "pushed": first.pushed,
        "unchanged_sync_s": round(second_s, 2),
        "unchanged_pushed": second.pushed,
        "remote_mb": round(remote_size() / 1e6, 1),
        "restore_s": round(restore_s, 2),
        "restore_memories_per_s": round(n / restore_s),
        "restored_engrams": count,
        "hash_equal": same,
    }


def git_overrides(work: Path) -> tuple[dict[str, Any], Any]:
    remote = work / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    return {"backup_type": "git", "GIT_BASE_URL": str(remote)}, lambda: dir_bytes(remote)


def s3_overrides(bucket: str = "smriti-bench") -> tuple[dict[str, Any], Any, Any]:
    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    creds = {"S3_ACCESS_KEY": "bench", "S3_SECRET_KEY": "bench", "S3_REGION": "us-east-1"}
    client = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
    )

    def size() -> int:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sum(o["Size"] for page in pages for o in page.get("Contents", []))

    overrides = {"backup_type": "s3", "S3_ENDPOINT": url, "S3_BUCKET": bucket, **creds}
    return overrides, size, server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--providers", default="git,s3", help="comma-separated: git, s3")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    configure_logging("warning")
    n = args.memories
    with tempfile.TemporaryDirectory(prefix="smriti-bench-backup-") as tmp:
        work = Path(tmp)
        source = work / "source"
        started = time.perf_counter()
        counts = populate(source, n)
        populate_s = time.perf_counter() - started
        portable, want = bench_portable(work, source, n)
        providers = []
        for name in [p.strip() for p in args.providers.split(",") if p.strip()]:
            if name == "git":
                overrides, size = git_overrides(work)
                providers.append(bench_provider("git", overrides, source, work, want, n, size))
            elif name == "s3":
                overrides, size, server = s3_overrides()
                try:
                    providers.append(bench_provider("s3", overrides, source, work, want, n, size))
                finally:
                    server.stop()
    payload = {
        "benchmark": "backup",
        "memories": n,
        "counts": counts,
        "populate_s": round(populate_s, 1),
        "portable": portable,
        "providers": providers,
        "peak_rss_mb": peak_rss_mb(),
        "machine": machine(),
    }
    print(table(["metric", "value"], [[k, str(v)] for k, v in portable.items()]))
    print()
    keys = [
        "first_sync_s",
        "unchanged_sync_s",
        "remote_mb",
        "restore_s",
        "restore_memories_per_s",
        "hash_equal",
    ]
    print(
        table(["provider", *keys], [[p["provider"], *(str(p[k]) for k in keys)] for p in providers])
    )
    path = write_results("backup", payload, args.out)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
