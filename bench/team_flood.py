"""One key floods the team server with sessions while another user works.

A real ``smriti serve --transport http`` (Kùzu, API keys, ``SMRITI_OWNER=off`` so the
server's RSS is the whole cost) on loopback. Two phases of ``--calls`` calls of the
second user ("bob", the MCP SDK client, store and recall in turn):

1. quiet: nobody else;
2. flood: the first user ("alice", two keys) opens sessions as fast as ``--flooders``
   concurrent raw HTTP clients can (``initialize`` without closing), ``--sessions``
   of them in all, until bob is done and they are all opened.

Reports bob's latency (p50, p99, errors) in each phase, how alice's session requests
were answered (200 after evicting her oldest idle session, or 429), the sessions she
holds at the end and the server's RSS quiet, at the cap, and after the flood. The
limits are the defaults unless given (``--key-sessions``, ``--user-sessions``).

    uv run python bench/team_flood.py                    # 200 calls, 2,000 sessions
    uv run python bench/team_flood.py --calls 50 --sessions 300

Results: a table on stdout and JSON in bench/results/team_flood-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, percentile, table, write_results  # noqa: E402

from smriti.testing.http_users import HttpServer, client, make_keys, rss_kb, user_env  # noqa: E402

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "flood", "version": "0"},
    },
}


async def bob_works(url: str, token: str, calls: int) -> dict[str, Any]:
    """``calls`` tool calls of bob's, store and recall in turn: latency and errors."""
    seconds: list[float] = []
    errors = 0
    async with client(url, token) as bob:
        for i in range(calls):
            started = time.perf_counter()
            try:
                if i % 2 == 0:
                    done = await bob.call_tool("smriti_store", {"content": f"bob note {i} kiwi"})
                else:
                    done = await bob.call_tool("smriti_recall", {"query": "kiwi note"})
                errors += bool(done.is_error)
            except Exception:
                errors += 1
            seconds.append(time.perf_counter() - started)
    ms = [s * 1000 for s in seconds]
    return {
        "calls": calls,
        "errors": errors,
        "p50_ms": round(percentile(ms, 50), 1),
        "p99_ms": round(percentile(ms, 99), 1),
        "max_ms": round(max(ms), 1),
    }


async def alice_floods(url: str, tokens: list[str], total: int, flooders: int) -> Counter[int]:
    """Open ``total`` sessions with ``flooders`` concurrent clients; status counts."""
    statuses: Counter[int] = Counter()
    left = iter(range(total))
    headers = {"Accept": "application/json, text/event-stream"}

    async def one(worker: int) -> None:
        sent = {**headers, "Authorization": f"Bearer {tokens[worker % len(tokens)]}"}
        async with httpx2.AsyncClient(timeout=60) as http:
            for _ in left:
                try:
                    answer = await http.post(url, json=INITIALIZE, headers=sent)
                    statuses[answer.status_code] += 1
                except httpx2.HTTPError:
                    statuses[0] += 1

    async with anyio.create_task_group() as tg:
        for worker in range(flooders):
            tg.start_soon(one, worker)
    return statuses


async def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    env = user_env(
        os.environ,
        root / "store",
        HOME=str(root),
        SMRITI_AUTH="keys",
        SMRITI_OWNER="off",
        LOG_LEVEL="info",  # the evictions are counted from the log
    )
    if args.key_sessions:
        env["SMRITI_KEY_SESSIONS"] = str(args.key_sessions)
    if args.user_sessions:
        env["SMRITI_USER_SESSIONS"] = str(args.user_sessions)
    keys_file = root / "store" / ".api-keys.json"
    tokens = make_keys(keys_file, ["bob", "alice"])
    alice = [tokens["alice"], make_keys(keys_file, ["alice"])["alice"]]
    with HttpServer(env, root / "server.log") as server:
        assert server.proc is not None
        await bob_works(server.url, tokens["bob"], 10)  # open bob's memory, warm up
        rss_quiet = rss_kb(server.proc.pid)
        quiet = await bob_works(server.url, tokens["bob"], args.calls)
        peak = [0]

        async def watch() -> None:
            while True:
                peak[0] = max(peak[0], rss_kb(server.proc.pid))
                await anyio.sleep(0.2)

        flooded: dict[str, Any] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)

            async def flood() -> None:
                flooded["statuses"] = await alice_floods(
                    server.url, alice, args.sessions, args.flooders
                )

            async def work() -> None:
                flooded["bob"] = await bob_works(server.url, tokens["bob"], args.calls)

            async with anyio.create_task_group() as inner:
                inner.start_soon(flood)
                inner.start_soon(work)
            tg.cancel_scope.cancel()
        rss_after = rss_kb(server.proc.pid)
        log = server.text()
    return {
        "machine": machine(),
        "sessions_opened_by_alice": args.sessions,
        "flooders": args.flooders,
        "quiet": quiet,
        "flood": flooded["bob"],
        "alice_statuses": dict(flooded["statuses"]),
        "evictions": log.count("idle session closed to make room"),
        "rss_mb": {
            "quiet": round(rss_quiet / 1024, 1),
            "peak_during_flood": round(peak[0] / 1024, 1),
            "after_flood": round(rss_after / 1024, 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="bob's calls per phase")
    parser.add_argument("--sessions", type=int, default=2000, help="sessions alice opens")
    parser.add_argument("--flooders", type=int, default=8, help="alice's concurrent clients")
    parser.add_argument("--key-sessions", type=int, default=0, help="SMRITI_KEY_SESSIONS")
    parser.add_argument("--user-sessions", type=int, default=0, help="SMRITI_USER_SESSIONS")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="smriti-flood-") as tmp:
        result = anyio.run(run, args, Path(tmp))
    rows = [
        [phase, r["calls"], r["errors"], r["p50_ms"], r["p99_ms"], r["max_ms"]]
        for phase, r in (("quiet", result["quiet"]), ("flood", result["flood"]))
    ]
    print(table(["bob's phase", "calls", "errors", "p50 ms", "p99 ms", "max ms"], rows))
    print(f"alice's session requests: {result['alice_statuses']}, evictions {result['evictions']}")
    print(f"server RSS (MB): {result['rss_mb']}")
    print(f"results: {write_results('team_flood', result)}")


if __name__ == "__main__":
    main()
