"""Engine benchmark: latency, bulk-import throughput, consolidation and memory, per backend.

For every selected backend and size, one process generates a synthetic corpus
(bench/corpus.py) and bulk-imports it with ``backend.import_records`` using precomputed
vectors (embedding time is excluded); then a second process opens the store, as a
server would, and measures through the Engine:

- recall (mode ``recall``, limit 10), search (vector only) and list latency, p50/p95;
- store latency (full pipeline: heuristic cues, associations, write) with the vectors of
  the stored texts and their cue names computed beforehand, as the targets exclude
  embedding time; the lexical embedder's own time for the same texts is reported beside
  it (``embed p50``);
- one consolidation run, and the Leiden part of it;
- the peak RSS of that second process before it closes the store, and including the
  close (which saves the working set's snapshot), and of the import process (database
  servers' memory is not included).

Usage::

    uv run python bench/engine.py                      # kuzu (+ reachable servers), 1k,10k
    uv run python bench/engine.py --sizes 1k,10k,100k --backends kuzu,falkordb
    uv run python bench/engine.py --sizes 10k,100k --backends kuzu,ladybug  # side by side
    uv run python bench/engine.py --start-servers      # also start FalkorDB and Neo4j
    uv run python bench/engine.py --sizes 10k --backends kuzu --profile
    uv run python bench/engine.py --sizes 100k --backends kuzu,ladybug --rounds 3

``--rounds N`` runs every backend N times, alternating their order from round to round
(A B, B A, A B ...), and reports for each figure the median of its rounds: on a shared
machine the load drifts over the minutes one run takes, and a single pass in a fixed
order credits that drift to whichever backend ran at the quieter moment.

Results: a table on stdout and JSON in bench/results/engine-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: About when this process started (before any smriti module was imported).
PROCESS_START = time.monotonic()
sys.path.insert(0, str(Path(__file__).resolve().parent))

import structlog  # noqa: E402
from common import (  # noqa: E402
    RESULTS,
    configure_logging,
    latency_summary,
    machine,
    peak_rss_mb,
    plugin_manager,
    table,
    timed,
    write_results,
)

from smriti.portable.importer import ENGRAM_BATCH  # noqa: E402

log = structlog.get_logger("bench.engine")
#: Memories per import_records call: the batch the portable importer (restore) uses.
IMPORT_BATCH = ENGRAM_BATCH
#: Environment variables a run passes on to both of its processes.
PASSED_THROUGH = ("FALKOR_", "NEO4J_", "SMRITI_KUZU", "SMRITI_WORKING_SET")
#: Seconds to wait for a working set to load (or a server's indexes to build) before measuring.
READY_TIMEOUT = 600.0


def parse_size(text: str) -> int:
    """``1k`` → 1000, ``100k`` → 100000, ``2500`` → 2500."""
    text = text.strip().lower()
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


# -- worker: one backend, one size ---------------------------------------------------------
def store_env(backend: str, size: int, tmp: str) -> dict[str, str]:
    """The settings of one run (the import process and the measuring process share them)."""
    env = {
        "ACCESSING_USER": f"bench{size}_{uuid.uuid4().hex[:6]}",
        "STORAGE_LOCATION": tmp,
        "DB_TYPE": backend,
        "SMRITI_EMBEDDER": "lexical",
        "SMRITI_CUE_EXTRACTOR": "heuristic",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "FALKOR_GRAPH": f"bench_{uuid.uuid4().hex[:8]}",
        **{k: v for k, v in os.environ.items() if k.startswith(PASSED_THROUGH)},
    }
    env["FALKOR_GRAPH"] = env.get("FALKOR_GRAPH_BENCH", env["FALKOR_GRAPH"])
    return env


def worker(backend: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Run every measurement for one backend and size; return a result row.

    The corpus is generated and bulk-imported by a separate process, so the peak RSS
    reported for the server is that of a process that opened the store, as a server
    does, not one that also held 100k generated records.
    """
    import corpus

    extra = corpus.memories(size + args.stores)[size:]
    with tempfile.TemporaryDirectory(prefix="smriti-bench-") as tmp:
        env = store_env(backend, size, tmp)
        imported = run_phase("import", size, env, args)
        from smriti.config import Settings

        row = measure(Settings.from_env(env), extra, args)
        row["import"], row["import_peak_rss_mb"] = imported["import"], imported["peak_rss_mb"]
        return row


def import_phase(size: int) -> dict[str, Any]:
    """Generate the corpus and bulk-import it into the store the environment names."""
    import corpus

    from smriti.config import Settings
    from smriti.default_plugins.lexical_embedder import LexicalEmbedder
    from smriti.engine.core import Engine

    records, prep_s = timed(lambda: corpus.records(corpus.memories(size), LexicalEmbedder()))
    log.info("corpus ready", size=size, seconds=round(prep_s, 1))
    engine = Engine.from_settings(Settings.from_env(dict(os.environ)), plugin_manager()).open()
    try:
        figures = bulk_import(engine.backend, records)
    finally:
        engine.close()
    return {"import": figures, "peak_rss_mb": peak_rss_mb()}


def run_phase(phase: str, size: int, env: dict[str, str], args: argparse.Namespace) -> dict:
    """Run one phase in a child process with ``env``; return its JSON result."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = Path(fh.name)
    cmd = [sys.executable, __file__, "--phase", phase, "--sizes", str(size), "--json", str(out)]
    cmd += ["--log-level", args.log_level]
    try:
        subprocess.run(cmd, env={**os.environ, **env}, check=True)
        return json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)


def measure(settings: Any, extra: Sequence[Any], args: argparse.Namespace) -> dict:
    """Open the imported store, then time the operations on an Engine."""
    import corpus

    from smriti.engine.core import Engine

    pm = plugin_manager()
    row: dict[str, Any] = {"backend": settings.db_type}
    engine, open_s = timed(lambda: Engine.from_settings(settings, pm).open())
    row["open_s"] = round(open_s, 3)
    try:
        queries = corpus.queries(args.queries)
        _, first_s = timed(lambda: engine.recall(queries[0], limit=10))
        row["first_recall_s"] = round(first_s, 3)
        row["start_to_first_recall_s"] = round(time.monotonic() - PROCESS_START, 3)
        row["working_set_s"] = wait_for_working_set(engine.backend)
        row["size"] = engine.backend.count_engrams()
        _, index_s = timed(lambda: engine.backend.ensure_indexes(engine.embedder.dims or 384, 0))
        row["index_s"] = round(index_s, 3)
        row["index_wait_s"] = wait_for_indexes(engine.backend)
        for q in queries[:5]:  # warm caches and lazily loaded extensions
            engine.recall(q, limit=10)
        row["recall"] = latencies(lambda q: engine.recall(q, limit=10), queries, args.profile, row)
        row["search"] = latencies(lambda q: engine.recall(q, limit=10, mode="search"), queries)
        row["list"] = latencies(lambda q: engine.recall(None, limit=10, mode="list"), queries)
        row["embed"], row["store"], row["store_embed_misses"] = store_latencies(engine, extra)
        if row["store_embed_misses"]:
            log.warning("texts embedded during timed stores", count=row["store_embed_misses"])
        row["consolidate"] = consolidation(engine)
        row["peak_rss_mb"] = peak_rss_mb()
        cleanup(engine)
    finally:
        engine.close()
    # A server also saves its working set when idle and at close (a snapshot).
    row["peak_rss_with_close_mb"] = peak_rss_mb()
    return row


def wait_for_working_set(backend: Any) -> float | None:
    """Seconds until the working set is loaded (None for a backend without one)."""
    status = getattr(backend, "working_set_status", None)
    if status is None:
        return None
    began = time.monotonic()
    while status()["state"] == "loading" and time.monotonic() - began < READY_TIMEOUT:
        time.sleep(0.05)
    if status()["state"] != "ready":
        log.warning("working set not loaded", status=status())
    return round(time.monotonic() - began, 3)


def wait_for_indexes(backend: Any) -> float | None:
    """Seconds until a server backend's search indexes are built (None for a backend
    without ``wait_for_indexes``): a server builds them in the background, and recalls
    timed before it is done would time exact scans and the build."""
    wait = getattr(backend, "wait_for_indexes", None)
    if wait is None:
        return None
    began = time.monotonic()
    try:
        wait(READY_TIMEOUT)
    except Exception as exc:
        log.warning("indexes not built", error=str(exc)[:300])
    return round(time.monotonic() - began, 3)


def bulk_import(backend: Any, records: Any) -> dict[str, float]:
    """import_records in batches: cues, engrams with their links, then edges."""
    started = time.perf_counter()
    backend.import_records([], records.cues, [], [], [])
    by_engram: dict[str, list[Any]] = {}
    for link in records.links:
        by_engram.setdefault(link.engram_id, []).append(link)
    for i in range(0, len(records.engrams), IMPORT_BATCH):
        batch = records.engrams[i : i + IMPORT_BATCH]
        links = [link for e in batch for link in by_engram.get(e.id, [])]
        backend.import_records(batch, [], links, [], [])
    backend.import_records([], [], [], records.associations, records.cooccurrences)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "memories_per_s": round(len(records.engrams) / seconds, 1),
        "engrams": len(records.engrams),
        "cues": len(records.cues),
        "links": len(records.links),
        "associations": len(records.associations),
        "cooccurrences": len(records.cooccurrences),
    }


def latencies(
    call: Any, inputs: Sequence[Any], profile: bool = False, row: dict | None = None
) -> dict[str, float]:
    """Time ``call`` on each input; optionally profile the loop with pyinstrument."""
    profiler = None
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
    seconds = [timed(lambda x=x: call(x))[1] for x in inputs]
    if profiler is not None and row is not None:
        profiler.stop()
        name = f"profile-recall-{row['backend']}-{row['size']}.txt"
        path = RESULTS / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(profiler.output_text(unicode=True, show_all=False), encoding="utf-8")
        row["profile"] = str(path)
    return latency_summary(seconds)


def consolidation(engine: Any) -> dict[str, Any]:
    """One consolidation run; Leiden timed by wrapping the clusterer."""
    leiden: list[float] = []
    clusterer = engine.clusterer
    if clusterer is not None:
        original = clusterer.cluster

        def timed_cluster(*a: Any, **kw: Any) -> Any:
            result, seconds = timed(lambda: original(*a, **kw))
            leiden.append(seconds)
            return result

        clusterer.cluster = timed_cluster
    report, seconds = timed(engine.consolidate)
    return {
        "seconds": round(seconds, 3),
        "leiden_s": round(sum(leiden), 3),
        "clusters": report.clusters,
        "pruned": report.pruned,
    }


def cleanup(engine: Any) -> None:
    """Delete what this run stored (servers keep running between runs)."""
    if engine.backend.name in ("kuzu", "ladybug"):
        return  # a temporary directory
    ids = [e.id for e in engine.backend.iter_engrams()]
    for i in range(0, len(ids), 2000):
        engine.backend.delete_engrams(ids[i : i + 2000])
    engine.backend.delete_orphan_cues()


# -- driver ------------------------------------------------------------------------------
def run_worker(backend: str, size: int, env: dict[str, str], args: argparse.Namespace) -> dict:
    """Run one worker process and return its row (or the error)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = Path(fh.name)
    cmd = [sys.executable, __file__, "--worker", backend, "--sizes", str(size)]
    cmd += ["--queries", str(args.queries), "--stores", str(args.stores), "--json", str(out)]
    cmd += ["--log-level", args.log_level] + (["--profile"] if args.profile else [])
    done = subprocess.run(cmd, env={**os.environ, **env}, check=False)
    try:
        if done.returncode != 0:
            return {"backend": backend, "size": size, "error": f"worker exit {done.returncode}"}
        return json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)


def installed_backends() -> list[str]:
    """Names of installed storage backends (aliases excluded)."""
    from smriti.plugins import Registry

    return [c.name for c in Registry(plugin_manager()).unique("backend")]


class PrecomputedEmbedder:
    """An embedder answering from vectors its wrapped embedder computed beforehand.

    Texts not computed beforehand are embedded then and counted in ``misses``.
    """

    def __init__(self, inner: Any, texts: Sequence[str]) -> None:
        self.inner = inner
        unique = list(dict.fromkeys(texts))
        self.vectors = dict(zip(unique, inner.embed(unique), strict=True))
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.misses += len(missing)
            self.vectors.update(zip(missing, self.inner.embed(missing), strict=True))
        return np.stack([self.vectors[t] for t in texts])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def store_latencies(engine: Any, extra: Sequence[Any]) -> tuple[dict, dict, int]:
    """(embedding, store, embedding misses): store timed on precomputed vectors.

    The embedding timed per memory is its content and every cue name it yields, which is
    at most what a store embeds (known cue names come from the cue cache).
    """
    from smriti import validation
    from smriti.engine.store import clean_cues

    texts = {}
    for m in extra:
        refs = clean_cues(engine.extractor.extract(m.text).cues, validation.tags(m.topic))
        texts[m.text] = [m.text, *(r.name for r in refs)]
    real = engine.embedder
    embed = latencies(lambda m: real.embed(texts[m.text]), list(extra))
    engine.embedder = PrecomputedEmbedder(real, [t for group in texts.values() for t in group])
    try:
        store = latencies(lambda m: engine.store(m.text, tags=m.topic), list(extra))
        return embed, store, engine.embedder.misses
    finally:
        engine.embedder = real


def median_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per backend and size: each figure the median of its rounds' figures (a
    round that failed is left out; a backend whose every round failed keeps its error)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["backend"], run["size"]), []).append(run)
    rows = []
    for group in groups.values():
        ok = [r for r in group if "error" not in r]
        rows.append({**_median(ok), "rounds": len(ok)} if ok else group[0])
    return rows


def _median(values: list[Any]) -> Any:
    """The median of numbers, recursively through dicts of the same shape; else the first."""
    first = values[0]
    if isinstance(first, dict):
        return {k: _median([v[k] for v in values if k in v]) for k in first}
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numbers) == len(values):
        median = statistics.median(numbers)
        whole = all(isinstance(v, int) for v in numbers) and median == int(median)
        return int(median) if whole else round(median, 3)
    return first


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The summary table on stdout."""
    headers = [
        "backend", "size", "import/s", "open s", "1st recall s", "start→1st s", "ws load s",
        "index s",
        "recall p50", "recall p95", "search p50", "search p95", "list p50", "list p95",
        "store p50", "store p95", "embed p50", "consol. s", "leiden s", "peak RSS MB",
        "with close MB", "import RSS MB",
    ]  # fmt: skip
    body = []
    for r in rows:
        if "error" in r:
            body.append([r["backend"], r["size"], r["error"], *[""] * (len(headers) - 3)])
            continue
        body.append([
            r["backend"], r["size"], r["import"]["memories_per_s"], r["open_s"],
            r["first_recall_s"], r["start_to_first_recall_s"], r["working_set_s"], r["index_s"],
            r["recall"]["p50_ms"], r["recall"]["p95_ms"], r["search"]["p50_ms"],
            r["search"]["p95_ms"], r["list"]["p50_ms"], r["list"]["p95_ms"],
            r["store"]["p50_ms"], r["store"]["p95_ms"], r["embed"]["p50_ms"],
            r["consolidate"]["seconds"],
            r["consolidate"]["leiden_s"], r["peak_rss_mb"], r.get("peak_rss_with_close_mb"),
            r["import_peak_rss_mb"],
        ])  # fmt: skip
    print(
        "Latencies in ms; import in memories/s; embedding excluded from import and store "
        "(embed p50: the lexical embedder's time for one stored memory's texts)."
    )
    print(table(headers, body))


def main(argv: Sequence[str] | None = None) -> None:
    """Parse flags; run the workers side by side in one run; print and save results."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1k,10k", help="comma-separated sizes (1k,10k,100k)")
    p.add_argument("--backends", default="", help="comma-separated names (default: installed)")
    p.add_argument("--queries", type=int, default=100, help="recall/search/list calls per run")
    p.add_argument("--stores", type=int, default=200, help="store calls per run")
    p.add_argument("--rounds", type=int, default=1, help="runs per backend, order alternated")
    p.add_argument("--start-servers", action="store_true", help="start FalkorDB and Neo4j")
    p.add_argument("--profile", action="store_true", help="pyinstrument profile of recall")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--log-level", default="warning")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    configure_logging(args.log_level)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    if args.phase == "import":
        Path(args.json).write_text(json.dumps(import_phase(sizes[0]), default=str))
        return
    if args.worker:
        row = worker(args.worker, sizes[0], args)
        Path(args.json).write_text(json.dumps(row, default=str))
        return
    from servers import Servers

    names = [b.strip() for b in args.backends.split(",") if b.strip()] or installed_backends()
    servers = Servers(start=args.start_servers)
    runs: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    try:
        envs = {}
        for backend in names:
            envs[backend] = servers.environment(backend)
            if envs[backend] is None:
                skipped[backend] = "server not reachable (set its address or --start-servers)"
        reachable = [b for b in names if envs[b] is not None]
        for round_no in range(args.rounds):
            for size in sizes:
                for backend in reachable if round_no % 2 == 0 else reachable[::-1]:
                    log.warning("running", backend=backend, size=size, round=round_no + 1)
                    row = run_worker(backend, size, envs[backend], args)
                    runs.append({**row, "round": round_no + 1})
    finally:
        servers.stop()
    rows = median_rows(runs) if args.rounds > 1 else runs
    if args.rounds > 1:
        print(f"Median of {args.rounds} rounds, backends in alternating order.")
    print_rows(rows)
    for backend, why in skipped.items():
        print(f"skipped {backend}: {why}")
    payload = {"machine": machine(), "args": vars(args), "rows": rows, "skipped": skipped,
               "server_settings": servers.settings}  # fmt: skip
    if args.rounds > 1:
        payload["runs"] = runs
    print(f"results: {write_results('engine', payload, args.out)}")


if __name__ == "__main__":
    main()
