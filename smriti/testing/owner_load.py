"""Many ``smriti`` processes on one embedded store, as a user's MCP clients and shell
run them, optionally while the store's owner process is killed again and again.

Used by the test suite and ``bench/owner.py``: real ``smriti`` stdio servers driven by
the MCP SDK client, real CLI commands, a real owner process and ``SIGKILL``. The
result says what every client saw (answers, errors) and what the store holds after
(through ``smriti export``), so that a caller can check that nothing acknowledged was
lost and nothing was stored twice.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

#: Text of the error a request gets when the owner died while running it and repeating
#: it is not harmless (see ``smriti.owner.client``): the one error a kill may cause.
IN_FLIGHT_FAILURE = "stopped while running"


def smriti_command() -> str:
    """The ``smriti`` console script of this interpreter's environment."""
    return shutil.which("smriti", path=str(Path(sys.executable).parent)) or "smriti"


@dataclass
class LoadResult:
    """What the clients saw and what the store held afterwards."""

    calls: int = 0
    #: (client, text) of every error a client saw.
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: Content -> id of every store that was acknowledged.
    stored: dict[str, str] = field(default_factory=dict)
    kills: int = 0
    seconds: float = 0.0
    #: Engram id -> content, from ``smriti export`` after the run.
    exported: dict[str, str] = field(default_factory=dict)
    exported_records: int = 0
    #: When each kill happened and each call was answered (time.monotonic()).
    kill_times: list[float] = field(default_factory=list)
    answer_times: list[float] = field(default_factory=list)

    @property
    def recovery_seconds(self) -> list[float]:
        """For each kill, how long until a client next got an answer."""
        answers = sorted(self.answer_times)
        out = []
        for killed in self.kill_times:
            after = next((t for t in answers if t > killed), None)
            if after is not None:
                out.append(after - killed)
        return out

    @property
    def in_flight_failures(self) -> int:
        """Errors that say the owner died while running a request (allowed)."""
        return sum(IN_FLIGHT_FAILURE in text for _, text in self.errors)

    @property
    def other_errors(self) -> list[tuple[str, str]]:
        """Every other error (there should be none)."""
        return [(who, text) for who, text in self.errors if IN_FLIGHT_FAILURE not in text]

    @property
    def lost(self) -> list[str]:
        """Acknowledged memories missing from the store."""
        return [c for c, key in self.stored.items() if self.exported.get(key) != c]

    @property
    def duplicated(self) -> int:
        """Memories stored more than once (same content under two ids)."""
        contents = list(self.exported.values())
        return len(contents) - len(set(contents))

    def to_dict(self) -> dict[str, Any]:
        """The figures, for JSON."""
        return {
            "calls": self.calls,
            "kills": self.kills,
            "seconds": round(self.seconds, 1),
            "acknowledged_stores": len(self.stored),
            "memories_after": len(self.exported),
            "lost": len(self.lost),
            "duplicated": self.duplicated,
            "in_flight_failures": self.in_flight_failures,
            "other_errors": len(self.other_errors),
            "recovery_max_s": round(max(self.recovery_seconds, default=0.0), 2),
            "recovery_median_s": round(_median(self.recovery_seconds), 2),
        }


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def load_env(store: Path, user: str = "load", **extra: str) -> dict[str, str]:
    """An environment for the processes: a store under ``store``, no API keys, the
    lexical embedder (no model to download), no periodic work."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"LLM_API_KEY", "EMBEDDING_API_KEY", "OPENAI_API_KEY", "DB_TYPE"}
    }
    env.update(
        STORAGE_LOCATION=str(store),
        ACCESSING_USER=user,
        SMRITI_EMBEDDER="lexical",
        BACKUP_TYPE="none",
        CONSOLIDATION_INTERVAL="0",
        HF_HUB_OFFLINE="1",
        LOG_LEVEL="warning",
        SMRITI_OWNER_IDLE=os.environ.get("SMRITI_OWNER_IDLE", "30"),
    )
    env.update(extra)
    return env


def cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``smriti ARGS`` to completion."""
    return subprocess.run(
        [smriti_command(), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def owner_pid(store: Path, user: str = "load") -> int | None:
    """The running owner's pid from its status file, if any."""
    try:
        return int(json.loads((store / user / "owner.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def run_load(
    store: Path,
    *,
    servers: int = 3,
    calls_per_server: int = 327,
    cli_calls: int = 19,
    kill_every: tuple[float, float] | None = None,
    seed: int = 7,
    user: str = "load",
    env_extra: dict[str, str] | None = None,
) -> LoadResult:
    """Run the mixed workload (see the module docstring); ``kill_every`` is the range
    of seconds between two SIGKILLs of the owner (None: no kills); ``env_extra``
    overrides the environment (e.g. another embedder)."""
    result = LoadResult()
    env = load_env(store, user, **(env_extra or {}))
    started = time.perf_counter()
    anyio.run(
        _run, env, result, servers, calls_per_server, cli_calls, kill_every, seed, store, user
    )
    result.seconds = time.perf_counter() - started
    _read_export(env, store, result)
    return result


async def _run(
    env: dict[str, str],
    result: LoadResult,
    servers: int,
    calls_per_server: int,
    cli_calls: int,
    kill_every: tuple[float, float] | None,
    seed: int,
    store: Path,
    user: str,
) -> None:
    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as workers:
            for n in range(servers):
                workers.start_soon(
                    _server_client, env, result, f"server{n}", calls_per_server, seed + n
                )
            workers.start_soon(_cli_client, env, result, cli_calls, seed + 100)
            if kill_every is not None:
                tg.start_soon(_killer, result, kill_every, seed + 200, store, user, done)
        done.set()


async def _server_client(
    env: dict[str, str], result: LoadResult, name: str, calls: int, seed: int
) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    rng = random.Random(seed)
    params = StdioServerParameters(command=smriti_command(), args=[], env=env)
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            for i in range(calls):
                tool, arguments, content = _mixed_call(rng, name, i)
                answer = await client.call_tool(tool, arguments)
                result.calls += 1
                result.answer_times.append(time.monotonic())
                text = " ".join(getattr(c, "text", "") for c in answer.content)
                if answer.is_error:
                    result.errors.append((name, text))
                elif content is not None:
                    result.stored[content] = answer.structured_content["id"]


def _mixed_call(rng: random.Random, name: str, i: int) -> tuple[str, dict[str, Any], str | None]:
    """Half stores, the rest recalls, lists and stats."""
    roll = rng.random()
    topic = rng.choice(("lighthouse", "kafka", "garden", "violin", "glacier", "espresso"))
    if roll < 0.5:
        content = f"{name} note {i}: the {topic} plan, step {rng.randint(1, 10**6)}"
        return "smriti_store", {"content": content}, content
    if roll < 0.85:
        return "smriti_recall", {"query": f"{topic} plan", "limit": 5}, None
    if roll < 0.95:
        return "smriti_recall", {"mode": "list", "limit": 5}, None
    return "smriti_manage", {"action": "stats"}, None


async def _cli_client(env: dict[str, str], result: LoadResult, calls: int, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(calls):
        if i % 2 == 0:
            content = f"cli note {i}: remember the {rng.randint(1, 10**6)} boxes"
            done = await anyio.to_thread.run_sync(cli, env, "store", content, "--json")
            if done.returncode == 0:
                result.stored[content] = json.loads(done.stdout)["id"]
        else:
            command = ("recall", "boxes") if i % 4 == 1 else ("stats",)
            done = await anyio.to_thread.run_sync(cli, env, *command, "--json")
        result.calls += 1
        result.answer_times.append(time.monotonic())
        if done.returncode != 0:
            result.errors.append(("cli", done.stderr.strip()[-500:]))


async def _killer(
    result: LoadResult,
    every: tuple[float, float],
    seed: int,
    store: Path,
    user: str,
    done: anyio.Event,
) -> None:
    rng = random.Random(seed)
    killed: set[int] = set()
    while not done.is_set():
        with anyio.move_on_after(rng.uniform(*every)):
            await done.wait()
        pid = owner_pid(store, user)
        if done.is_set() or pid is None or pid in killed:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed.add(pid)
        result.kills += 1
        result.kill_times.append(time.monotonic())


def _read_export(env: dict[str, str], store: Path, result: LoadResult) -> None:
    out = store.parent / f"{store.name}-export.jsonl"
    done = cli(env, "export", str(out))
    if done.returncode != 0:
        raise RuntimeError(f"smriti export failed: {done.stderr}")
    for line in out.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        result.exported_records += 1
        if record.get("kind") == "engram":
            result.exported[record["id"]] = record["content"]
