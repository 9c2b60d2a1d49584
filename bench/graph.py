"""``smriti graph`` at scale: page size and time to draw a large store with the default limit.

For each size, the engine benchmark's synthetic corpus (bench/corpus.py) is bulk-imported
into a fresh Kùzu store by a child process (bench/engine.py's import phase), then
consolidated once so memories have Leiden clusters. Then:

- in this process, on an engine opened here: the ``graph`` operation (selecting the
  strongest memories, their cues, edges and cluster labels), the igraph layout, and
  the HTML page, each timed, and the page's size;
- the real command, ``smriti graph OUT.html``, through the store's owner process as a
  user runs it, timed end to end twice: "cold" starts the owner, which opens the store
  (most of the time at 100k memories), "warm" finds it running (as while an MCP server
  is using the memory).

    uv run --all-packages --all-extras python bench/graph.py --sizes 10k
    uv run --all-packages --all-extras python bench/graph.py --sizes 100k

Results: a table on stdout and JSON in bench/results/graph-<timestamp>.json.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import configure_logging, machine, plugin_manager, table, timed, write_results  # noqa: E402
from engine import parse_size, run_phase, store_env  # noqa: E402


def measure(size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Import, consolidate, then time the picture in-process and through the CLI."""
    from smriti.config import Settings
    from smriti.engine import Engine
    from smriti.graphview import DEFAULT_LIMIT
    from smriti.graphview.render import write_picture
    from smriti.owner import ops
    from smriti.requests import GraphRequest

    row: dict[str, Any] = {"size": size, "limit": args.limit or DEFAULT_LIMIT}
    with tempfile.TemporaryDirectory(prefix="smriti-graph-bench-") as tmp:
        env = store_env("kuzu", size, tmp)
        imported = run_phase("import", size, env, args)
        row["import_s"] = imported["import"].get("seconds")
        engine = Engine.from_settings(Settings.from_env(env), plugin_manager()).open()
        try:
            report, row["consolidate_s"] = timed(engine.consolidate)
            row["clusters"] = report.clusters
            row["memories"] = engine.backend.count_engrams()
            query = {"limit": args.limit} if args.limit else {}
            data, row["select_s"] = timed(lambda: ops.run(engine, GraphRequest.parse(**query)))
        finally:
            engine.close()
        out = Path(tmp) / "graph.html"
        written = write_picture(data, out, "html", "importance", "Smriti memory")
        row.update(
            layout_s=written.layout_seconds,
            render_s=written.render_seconds,
            page_kb=round(written.bytes / 1024, 1),
            drawn_memories=len(data["nodes"]),
            drawn_cues=len(data["cues"]),
            associations=len(data["associations"]),
            cue_edges=len(data["cue_edges"]),
            limited=data["limited"],
        )
        row["cli"] = cli_run(env, Path(tmp) / "cli.html", args.limit)
    return row


def cli_run(env: dict[str, str], out: Path, limit: int | None) -> dict[str, Any]:
    """``smriti graph OUT --json`` as a subprocess twice: first starting the store's
    owner (which opens the store), then with that owner running, as when an MCP server
    is using the memory. The owner is stopped afterwards."""
    full = {**os.environ, **env}
    cmd = [sys.executable, "-m", "smriti", "graph", str(out), "--json"]
    if limit:
        cmd += ["--limit", str(limit)]
    runs = {}
    for name in ("cold", "warm"):
        started = time.perf_counter()
        done = subprocess.run(cmd, env=full, capture_output=True, text=True, check=True)
        report = json.loads(done.stdout)
        runs[name] = {"wall_s": round(time.perf_counter() - started, 2), **report["seconds"]}
    subprocess.run([sys.executable, "-m", "smriti", "owner", "stop"], env=full, check=False,
                   capture_output=True)  # fmt: skip
    return {"bytes": report["bytes"], **runs}


HEADERS = ("memories", "clusters", "drawn", "cues", "edges", "select s", "layout s",
           "render s", "page KB", "CLI cold s", "CLI warm s")  # fmt: skip


def _row(r: dict[str, Any]) -> tuple[Any, ...]:
    edges = r["associations"] + r["cue_edges"]
    cli = r["cli"]
    return (r["memories"], r["clusters"], r["drawn_memories"], r["drawn_cues"], edges,
            r["select_s"], r["layout_s"], r["render_s"], r["page_kb"],
            cli["cold"]["wall_s"], cli["warm"]["wall_s"])  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10k", help="comma-separated sizes (10k,100k)")
    p.add_argument("--limit", type=int, default=None, help="--limit (default: the command's)")
    p.add_argument("--out", type=Path, default=None, help="JSON output path")
    p.add_argument("--log-level", default="warning")
    args = p.parse_args()
    configure_logging(args.log_level)
    rows = [measure(parse_size(s), args) for s in args.sizes.split(",") if s.strip()]
    print(table(HEADERS, [_row(r) for r in rows]))
    path = write_results("graph", {"machine": machine(), "runs": rows}, args.out)
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
