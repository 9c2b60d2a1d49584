"""Page load time of the memory web page: search, list and a memory's page.

The real ``smriti ui --no-browser`` is started on a store (given by path and user, or
the engine benchmark's synthetic corpus of ``--size`` memories bulk-imported into a
fresh Kùzu store, bench/engine.py's import phase), so every page goes through the
page's HTTP server and the store's owner process as a user's browser does. Each page
is fetched once to warm up, then ``--rounds`` times; a page's time is from the request
to the last byte of the HTML (what the browser needs before it draws; the CSS and
script are two small cached files).

- search: ``/ui/?q=...`` with words taken from the store's memories (recall mode);
- list: the first page of 50, and the page after it (through its cursor);
- memory: a memory's page (content, cues, associations, versions, cluster) for ids
  taken from the list;
- with ``--all-pages``, also the pages that read the whole store, ``--slow-rounds``
  times each: counts (with growth by month), tidy (near-duplicate groups), clusters
  and the graph (its 300 strongest memories, laid out by igraph).

    uv run --all-packages --all-extras python bench/ui_load.py --size 10k
    uv run --all-packages --all-extras python bench/ui_load.py --size 100k --all-pages
    uv run --all-packages --all-extras python bench/ui_load.py --store ~/.smriti --user alice

Results: a table on stdout and JSON in bench/results/ui_load-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import configure_logging, latency_summary, machine, table, write_results  # noqa: E402
from engine import parse_size, run_phase, store_env  # noqa: E402

#: How long ``smriti ui`` may take to print its URL (it opens the store first).
START_TIMEOUT = 600


def start_ui(env: dict[str, str]) -> tuple[subprocess.Popen[str], str, float]:
    """``smriti ui --no-browser`` on ``env``'s store: the process, its URL, seconds to it."""
    smriti = str(Path(sys.executable).with_name("smriti"))
    started = time.perf_counter()
    proc = subprocess.Popen(
        [smriti, "ui", "--no-browser"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT)
    if not ready or proc.stdout is None:
        proc.kill()
        raise SystemExit(f"smriti ui printed no URL within {START_TIMEOUT} s")
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"smriti ui failed: {url!r} (exit {proc.wait()})")
    return proc, url, time.perf_counter() - started


def fetch(client: httpx2.Client, path: str) -> tuple[float, str]:
    """Seconds from the request to the page's last byte, and the page."""
    started = time.perf_counter()
    answer = client.get(path)
    text = answer.text
    seconds = time.perf_counter() - started
    if answer.status_code != 200:
        raise SystemExit(f"GET {path}: {answer.status_code} {text[:300]}")
    return seconds, text


#: The pages that read the whole store, timed with ``--all-pages``.
SLOW_PAGES = ("/ui/stats", "/ui/tidy", "/ui/clusters", "/ui/graph")


def measure_pages(client: httpx2.Client, rounds: int, slow: int = 0) -> dict[str, Any]:
    """Time every page kind; returns per-page latency summaries and sizes."""
    _, first = fetch(client, "/ui/list")  # warms the owner and the page's templates
    ids = re.findall(r'<tr class="result" data-id="([^"]+)">', first)
    following = re.search(r'href="(/ui/list\?[^"]*cursor=[^"]+)" id="next"', first)
    words = [w for w in re.findall(r"[a-z]{5,}", first.split('id="results"', 1)[-1].lower())]
    words = [w for w in dict.fromkeys(words) if w not in {"class", "result", "semantic"}]
    if not ids or not words:
        raise SystemExit("the store's list is empty: nothing to measure")
    pages = {
        "search": [f"/ui/?q={words[i % len(words)]}+{words[(i + 3) % len(words)]}"
                   for i in range(rounds)],
        "list": ["/ui/list"] * rounds,
        "list_next": [following.group(1).replace("&amp;", "&")] * rounds if following else [],
        "memory": [f"/ui/memory/{ids[i % len(ids)]}" for i in range(rounds)],
        **{path.rsplit("/", 1)[1]: [path] * slow for path in SLOW_PAGES},
    }  # fmt: skip
    out: dict[str, Any] = {}
    for name, paths in pages.items():
        if not paths:
            continue
        fetch(client, paths[0])  # warm-up, not counted
        times, sizes = [], []
        for path in paths:
            seconds, text = fetch(client, path)
            times.append(seconds)
            sizes.append(len(text.encode()))
        out[name] = {**latency_summary(times), "kb": round(sum(sizes) / len(sizes) / 1024, 1)}
    return out


def run(env: dict[str, str], rounds: int, slow: int = 0) -> dict[str, Any]:
    """Start the page on ``env``'s store, sign in with its one-time link, time pages."""
    proc, url, start_s = start_ui(env)
    try:
        site = url.split("/ui/", 1)[0]
        with httpx2.Client(base_url=site, timeout=120, follow_redirects=True) as client:
            opened = client.get(url)
            if opened.status_code != 200:
                raise SystemExit(f"the one-time link was refused: {opened.status_code}")
            pages = measure_pages(client, rounds, slow)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    return {"start_s": round(start_s, 2), "pages": pages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="STORAGE_LOCATION of an existing store")
    parser.add_argument("--user", help="its ACCESSING_USER")
    parser.add_argument("--db-type", default=None, help="its DB_TYPE (default: auto)")
    parser.add_argument("--size", default="10k", help="synthetic store size without --store")
    parser.add_argument("--rounds", type=int, default=30, help="requests per page kind")
    parser.add_argument("--all-pages", action="store_true", help="also counts, tidy, graph")
    parser.add_argument("--slow-rounds", type=int, default=5, help="requests of those pages")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    configure_logging(args.log_level)
    result: dict[str, Any] = {"benchmark": "ui_load", "machine": machine(), "rounds": args.rounds}
    slow = args.slow_rounds if args.all_pages else 0
    if args.store:
        if not args.user:
            raise SystemExit("--store needs --user (the store's ACCESSING_USER)")
        env = {"STORAGE_LOCATION": args.store, "ACCESSING_USER": args.user}
        if args.db_type:
            env["DB_TYPE"] = args.db_type
        result.update(store=args.store, user=args.user, **run(env, args.rounds, slow))
    else:
        size = parse_size(args.size)
        with tempfile.TemporaryDirectory(prefix="smriti-ui-bench-") as tmp:
            env = store_env("kuzu", size, tmp)
            imported = run_phase("import", size, env, args)
            result.update(size=size, import_s=imported["import"].get("seconds"))
            result.update(run(env, args.rounds, slow))
    rows = [
        (name, f"{p['p50_ms']:.1f}", f"{p['p95_ms']:.1f}", f"{p['kb']:.1f}")
        for name, p in result["pages"].items()
    ]
    print(f"smriti ui started (URL printed) in {result['start_s']} s")
    print(table(("page", "p50 ms", "p95 ms", "KB"), rows))
    print(f"wrote {write_results('ui_load', result)}")


if __name__ == "__main__":
    main()
