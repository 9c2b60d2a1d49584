"""Backends the engine benchmark can use, by name, and the servers some of them need.

Each backend name maps to a function that returns the settings to reach it (or None when
it is not reachable and may not be started). ``--start-servers`` starts an embedded
FalkorDB (falkordblite) and a Neo4j server from the Neo4j plugin's test launcher;
otherwise FALKOR_ADDR / NEO4J_URI (with NEO4J_USERNAME, NEO4J_PASSWORD) must point at
running servers. Add a backend here to benchmark it.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from common import BENCH

log = structlog.get_logger("bench.servers")


def reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a TCP connection to host:port succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_extra_settings(defaults: tuple[str, ...], variable: str) -> tuple[str, ...]:
    """``defaults`` (``name=value``) with the settings in ``variable`` (separated by
    ``;``) added, one replacing a default of the same name: to compare a server setting
    side by side without editing the launcher's defaults."""
    parts = (p.strip() for p in os.environ.get(variable, "").split(";"))
    extra = [p for p in parts if p]
    bad = [p for p in extra if "=" not in p]
    if bad:
        raise SystemExit(f"{variable}: expected name=value, got {bad[0]!r}")
    merged = dict(line.split("=", 1) for line in (*defaults, *extra))
    return tuple(f"{name}={value}" for name, value in merged.items())


@dataclass
class Servers:
    """Servers started for this run, stopped by ``stop``."""

    start: bool = False
    stops: list[Callable[[], None]] = field(default_factory=list)
    #: The settings of each server this object started, by backend (for the results).
    settings: dict[str, list[str]] = field(default_factory=dict)

    def stop(self) -> None:
        """Stop every server this object started, newest first."""
        while self.stops:
            try:
                self.stops.pop()()
            except Exception as exc:
                log.warning("server stop failed", error=str(exc))

    # -- per backend: environment for the worker, or None when unavailable ------------
    def kuzu(self) -> dict[str, str]:
        """Kùzu is embedded: always available."""
        return {}

    def falkordb(self) -> dict[str, str] | None:
        """FALKOR_ADDR if it answers, else an embedded FalkorDB with ``--start-servers``."""
        addr = os.environ.get("FALKOR_ADDR", "").strip()
        if addr:
            host, port = addr.rsplit(":", 1)
            return {"FALKOR_ADDR": addr} if reachable(host, int(port)) else None
        if not self.start:
            return None
        from redislite.falkordb_client import FalkorDB as EmbeddedFalkorDB

        port = free_port()
        home = Path(tempfile.mkdtemp(prefix="smriti-bench-falkor-"))
        config: dict[str, Any] = {"port": str(port), "bind": "127.0.0.1", "save": None}
        config["appendonly"] = "no"
        lite = EmbeddedFalkorDB(str(home / "falkor.rdb"), serverconfig=config)
        self.stops.append(lite.close)
        return {"FALKOR_ADDR": f"127.0.0.1:{port}"}

    def neo4j(self) -> dict[str, str] | None:
        """NEO4J_URI if it answers, else the Neo4j plugin's test server with ``--start-servers``."""
        uri = os.environ.get("NEO4J_URI", "").strip()
        if uri:
            hostport = uri.split("://", 1)[-1].split("/", 1)[0]
            host, _, port = hostport.partition(":")
            if not reachable(host, int(port or 7687)):
                return None
            keys = ("NEO4J_URI", "NEO4J_USERNAME", "NEO4J_PASSWORD", "NEO4J_DATABASE")
            return {k: os.environ[k] for k in keys if k in os.environ}
        if not self.start:
            return None
        launcher = BENCH.parent / "plugins/smriti-backend-neo4j/tests/neo4j_server/server.py"
        spec = importlib.util.spec_from_file_location("smriti_bench_neo4j_server", launcher)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        # The full JIT, as a production server runs, and a page cache that holds a
        # 100k store (module.BENCH_SETTINGS), plus any in NEO4J_BENCH_SETTINGS.
        home = Path(tempfile.mkdtemp(prefix="smriti-bench-neo4j-"))
        settings = with_extra_settings(module.BENCH_SETTINGS, "NEO4J_BENCH_SETTINGS")
        server = module.start(home, quick_jit=False, settings=settings, heap="2g")
        self.stops.append(server.stop)
        self.settings["neo4j"] = list(settings)
        return {
            "NEO4J_URI": server.uri,
            "NEO4J_USERNAME": server.username,
            "NEO4J_PASSWORD": server.password,
        }

    def environment(self, backend: str) -> dict[str, str] | None:
        """Settings for ``backend``, or None when it cannot be reached here."""
        method = getattr(self, backend.replace("-", "_"), None)
        if method is None:
            return {}  # an unknown third-party backend: assume its own settings suffice
        try:
            result: dict[str, str] | None = method()
        except Exception as exc:
            log.warning("backend unavailable", backend=backend, error=str(exc)[:300])
            return None
        return result
