"""Driving a real ``smriti serve --transport http`` with many authenticated users.

For tests and benchmarks of the multi-user HTTP server on any backend: start the
console script as a subprocess (``HttpServer``), give each user an API key
(``make_keys``), and run every user's mixed calls at once over the MCP SDK's streamable
HTTP client (``run_users``). The ``Report`` counts calls, errors, results that belong to
another user (every returned id is checked against the ids the user stored) and lost
writes (what a user stored and did not forget must all be listed at the end), with
latency percentiles. Nothing here is faked: the server, the backend and the client
are the real ones.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

#: Calls of one user in flight at once (so reads of one user overlap too).
STREAMS_PER_USER = 3
#: The mix of one user's calls, by kind (it adds up to 50).
MIX = {"store": 20, "recall": 16, "list": 6, "stats": 4, "forget": 4}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def smriti_command() -> str:
    """The installed ``smriti`` console script beside this Python."""
    return str(Path(sys.executable).with_name("smriti"))


def rss_kb(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


class HttpServer:
    """``smriti serve --transport http`` as a subprocess; stderr goes to ``log``."""

    def __init__(self, env: Mapping[str, str], log: Path, host: str = "127.0.0.1") -> None:
        self.env = dict(env)
        self.log = log
        self.host = host
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The MCP endpoint, reached over loopback."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float = 60.0) -> HttpServer:
        """Start the server and wait until it accepts connections; AssertionError with
        its log when it exits or does not listen in time."""
        args = [smriti_command(), "serve", "--transport", "http"]
        args += ["--host", self.host, "--port", str(self.port)]
        with self.log.open("ab") as errlog:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errlog,
                env=self.env,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            if self.proc.poll() is not None:
                raise AssertionError(f"smriti serve exited {self.proc.returncode}:\n{self.text()}")
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"smriti serve did not listen within {timeout} s:\n{self.text()}")

    def text(self) -> str:
        """The server's log so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, wait, return the exit code (killed after ``timeout``)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def client(url: str, token: str | None = None, headers: Mapping[str, str] | None = None) -> Any:
    """An MCP SDK client for ``url`` sending ``Authorization: Bearer token``."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    http = create_mcp_http_client(headers=sent)
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


def make_keys(keys_file: Path, users: Sequence[str]) -> dict[str, str]:
    """One read-and-write API key per user, in ``keys_file``; user -> key."""
    from smriti.auth.keys import KeyStore

    store = KeyStore(keys_file)
    return {user: store.create(user) for user in users}


@dataclass
class Report:
    """What ``run_users`` saw."""

    calls: int = 0
    errors: list[str] = field(default_factory=list)
    #: (user, id) of every returned memory that the user did not store.
    leaks: list[tuple[str, str]] = field(default_factory=list)
    #: (user, id) of every stored and not forgotten memory missing at the end.
    lost: list[tuple[str, str]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def percentile(self, q: float) -> float:
        """The ``q`` quantile of call latencies, in milliseconds."""
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    def summary(self) -> dict[str, Any]:
        """The figures, JSON-ready."""
        return {
            "calls": self.calls,
            "errors": len(self.errors),
            "leaks": len(self.leaks),
            "lost_writes": len(self.lost),
            "p50_ms": round(self.percentile(0.5), 1),
            "p99_ms": round(self.percentile(0.99), 1),
            "seconds": round(self.seconds, 1),
            "calls_per_s": round(self.calls / self.seconds, 1) if self.seconds else 0.0,
        }


class _User:
    def __init__(self, name: str, token: str, seed: int) -> None:
        self.name = name
        self.token = token
        self.word = f"zq{zlib.crc32(name.encode()):010d}"  # in this user's memories only
        self.stored: set[str] = set()
        self.forgotten: set[str] = set()
        plan = [kind for kind, n in MIX.items() for _ in range(n)]
        random.Random(seed).shuffle(plan)
        self.plan = plan
        self.counter = 0


async def run_users(url: str, tokens: Mapping[str, str], streams: int = STREAMS_PER_USER) -> Report:
    """Every user's 50 mixed calls at once (``streams`` in flight per user), then a
    check that each user's memory holds exactly what they stored and did not forget."""
    report = Report()
    users = [_User(name, token, i) for i, (name, token) in enumerate(sorted(tokens.items()))]
    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for user in users:
            tg.start_soon(_one_user, url, user, streams, report)
    report.seconds = time.monotonic() - started
    async with anyio.create_task_group() as tg:
        for user in users:
            tg.start_soon(_check_kept, url, user, report)
    return report


async def _one_user(url: str, user: _User, streams: int, report: Report) -> None:
    try:
        async with client(url, user.token) as session:
            queue = list(user.plan)

            async def worker() -> None:
                while queue:
                    await _call(session, user, queue.pop(), report)

            async with anyio.create_task_group() as tg:
                for _ in range(streams):
                    tg.start_soon(worker)
    except Exception as exc:  # a session that failed to open counts its calls as errors
        report.errors.append(f"{user.name}: session failed: {exc!r}")


async def _call(session: Any, user: _User, kind: str, report: Report) -> None:
    kind, name, args = _arguments(user, kind)
    began = time.monotonic()
    try:
        result = await session.call_tool(name, args)
    except Exception as exc:
        report.calls += 1
        report.errors.append(f"{user.name} {kind}: {exc!r}")
        return
    report.latencies.append(time.monotonic() - began)
    report.calls += 1
    if result.is_error:
        report.errors.append(f"{user.name} {kind}: {result.content}")
        return
    data = result.structured_content or {}
    if kind == "store":
        user.stored.add(str(data.get("id")))
    elif kind == "forget":
        user.forgotten.add(str(data["forgotten"]["id"]))
    elif kind in ("recall", "list"):
        _check_results(user, data.get("results", []), report)
    elif kind == "stats" and data["stats"].get("user") not in (None, user.name):
        report.leaks.append((user.name, f"stats of {data['stats'].get('user')}"))


def _arguments(user: _User, kind: str) -> tuple[str, str, dict[str, Any]]:
    """(kind, tool, arguments) of the next call; a forget with nothing to forget yet is
    a stats call."""
    user.counter += 1
    if kind == "store":
        content = f"{user.word} note {user.counter} of {user.name} about topic{user.counter % 5}"
        return kind, "smriti_store", {"content": content, "tags": user.name}
    if kind == "recall":
        query = f"{user.word} topic{user.counter % 5}"
        return kind, "smriti_recall", {"query": query, "limit": 10}
    if kind == "list":
        return kind, "smriti_recall", {"query": "", "mode": "list", "limit": 20}
    kept = sorted(user.stored - user.forgotten)
    if kind == "forget" and kept:
        victim = kept[user.counter % len(kept)]
        user.forgotten.add(victim)  # claimed now, so another stream does not pick it too
        return kind, "smriti_manage", {"action": "forget", "memory_id": victim}
    return "stats", "smriti_manage", {"action": "stats"}


def _check_results(user: _User, results: list[dict[str, Any]], report: Report) -> None:
    for item in results:
        memory_id = str(item.get("id"))
        mine = memory_id in user.stored or user.word in str(item.get("content", ""))
        if not mine:
            report.leaks.append((user.name, memory_id))


async def _check_kept(url: str, user: _User, report: Report) -> None:
    try:
        async with client(url, user.token) as session:
            listed = await session.call_tool(
                "smriti_recall", {"query": "", "mode": "list", "limit": 100}
            )
    except Exception as exc:
        report.errors.append(f"{user.name} final list: {exc!r}")
        return
    if listed.is_error:
        report.errors.append(f"{user.name} final list: {listed.content}")
        return
    results = (listed.structured_content or {}).get("results", [])
    present = {str(r.get("id")) for r in results}
    # every store has been answered by now: each id listed must be one of them
    report.leaks.extend((user.name, m) for m in sorted(present - user.stored))
    report.lost.extend((user.name, m) for m in sorted(user.stored - user.forgotten - present))
    report.leaks.extend((user.name, m) for m in sorted(present & user.forgotten))


def user_env(base: Mapping[str, str], storage: Path, **extra: str) -> dict[str, str]:
    """The server's environment: ``base`` without API keys, a storage location, the
    built-in lexical embedder (no model download), and ``extra``."""
    env = {
        k: v
        for k, v in base.items()
        if k not in ("LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY")
        and not k.startswith("SMRITI_")
    }
    env.update(
        STORAGE_LOCATION=str(storage),
        SMRITI_EMBEDDER="lexical",
        HF_HUB_OFFLINE="1",
        LOG_LEVEL="info",
        PYTHONUNBUFFERED="1",
        CONSOLIDATION_INTERVAL="0",
        BACKUP_TYPE="none",
    )
    env.update(extra)
    return env


def owner_pids(storage: Path) -> list[int]:
    """The pids of the owner processes of the stores under ``storage``."""
    import json

    pids = []
    for info in storage.glob("*/owner.json"):
        try:
            pids.append(int(json.loads(info.read_text())["pid"]))
        except (OSError, ValueError, KeyError):
            continue
    return pids


def memory_per_user(server_pid: int, before_kb: int, storage: Path, users: int) -> dict[str, Any]:
    """RSS figures: the server's growth and the owners' RSS, per loaded user, in MB."""
    server_kb = rss_kb(server_pid)
    owners_kb = sum(rss_kb(pid) for pid in owner_pids(storage))
    per_user = ((server_kb - before_kb) + owners_kb) / max(1, users) / 1024
    return {
        "server_rss_mb": round(server_kb / 1024, 1),
        "server_growth_mb": round((server_kb - before_kb) / 1024, 1),
        "owner_processes": len(owner_pids(storage)),
        "owners_rss_mb": round(owners_kb / 1024, 1),
        "mb_per_loaded_user": round(per_user, 1),
    }


async def many_users(
    env: Mapping[str, str], root: Path, label: str, users: int = 20, prefix: str = "user"
) -> dict[str, Any]:
    """Start the server on ``env`` (its STORAGE_LOCATION under ``root``) with one API
    key per user, run ``run_users`` and return the figures: the report's summary and
    the memory per loaded user. The figures are appended as one JSON line to the file
    named by ``SMRITI_HTTP_USERS_REPORT``, when set. The server must stop with 0."""
    import json

    storage = Path(env["STORAGE_LOCATION"])
    names = [f"{prefix}{i:02d}" for i in range(users)]
    tokens = make_keys(storage / ".api-keys.json", names)
    server = HttpServer({**env, "SMRITI_AUTH": "keys"}, root / f"{label}-server.log").start()
    try:
        assert server.proc is not None
        await anyio.sleep(1.0)  # let the server settle before its baseline is taken
        before = rss_kb(server.proc.pid)
        report = await run_users(server.url, tokens)
        figures = {"backend": label, "users": users, **report.summary()}
        figures.update(memory_per_user(server.proc.pid, before, storage, users))
        figures["sample_errors"] = report.errors[:3]
    finally:
        code = server.stop()
    assert code == 0, server.text()[-3000:]
    figures["leaked_ids"] = report.leaks[:5]
    figures["lost_ids"] = report.lost[:5]
    out = os.environ.get("SMRITI_HTTP_USERS_REPORT", "").strip()
    if out:
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(figures) + "\n")
    return figures


__all__ = [
    "HttpServer",
    "Report",
    "client",
    "free_port",
    "make_keys",
    "many_users",
    "memory_per_user",
    "owner_pids",
    "rss_kb",
    "run_users",
    "smriti_command",
    "user_env",
]

if os.name == "nt":  # pragma: no cover - the helpers read /proc and send SIGTERM
    raise ImportError("smriti.testing.http_users needs a POSIX system")
