"""Start a real Neo4j Community server from Maven Central jars, for the test suite.

The jars are fetched once with ``mvn dependency:copy-dependencies`` (pom.xml beside this
file) into ``~/.cache/smriti-test/neo4j/<version>/lib`` (override the root with
``SMRITI_TEST_CACHE``); ``Launcher.java`` runs the embedded DBMS with its Bolt server on
127.0.0.1 and a free port. Authentication is enabled and the initial password is set
through Bolt, so tests can exercise both a good and a wrong password against one server.

Run ``python server.py`` to start one by hand (it prints the URI and password and stops
on Enter).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
NEO4J_VERSION = "5.26.30"
USERNAME = "neo4j"
PASSWORD = "smriti-test-password"
READY_LINE = "NEO4J-READY"
JVM_FLAGS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
    "-Xms256m",
    "-XX:+UseParallelGC",
)
#: The C1-only JIT starts faster (the tests' choice); benchmarks leave it out and run the
#: full JIT, as a production server does.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


class ServerError(RuntimeError):
    """The test server could not be set up or started (the message says why)."""


@dataclass
class Neo4jServer:
    """A running test server: its Bolt URI, credentials, process and log file."""

    uri: str
    username: str
    password: str
    process: subprocess.Popen[str]
    log_path: Path
    start_seconds: float
    home: Path
    _stdout: list[str] = field(default_factory=list)

    def stop(self, timeout: float = 60.0) -> None:
        """Close the launcher's stdin (clean shutdown), killing it after ``timeout``."""
        if self.process.poll() is None:
            try:
                if self.process.stdin:
                    self.process.stdin.close()
                self.process.wait(timeout=timeout)
            except (subprocess.TimeoutExpired, OSError):
                self.process.kill()
                self.process.wait(timeout=10)


def cache_root() -> Path:
    """Where downloaded jars live between test sessions."""
    root = os.environ.get("SMRITI_TEST_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "smriti-test"
    return base / "neo4j" / NEO4J_VERSION


def ensure_jars() -> Path:
    """The directory of Neo4j jars, downloading them with Maven when absent."""
    lib = cache_root() / "lib"
    marker = lib / ".complete"
    if marker.exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServerError("Maven (mvn) is not installed: it is needed once to fetch Neo4j jars")
    staging = Path(tempfile.mkdtemp(prefix="lib-", dir=_mkdir(cache_root())))
    cmd = [
        mvn, "-q", "-B", "-f", str(HERE / "pom.xml"), "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise ServerError(f"mvn could not fetch Neo4j {NEO4J_VERSION}:\n{done.stdout[-3000:]}")
    (staging / ".complete").write_text(NEO4J_VERSION)
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
    return lib


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Settings for benchmarks at 100,000 memories: the store (two copies of each embedding,
#: about a million edges) fits in the page cache, and the vector indexes are built with
#: the larger population buffer the plugin README recommends for large stores (a few
#: Lucene segments instead of about thirty, which a vector query searches one by one).
#: Durability is unchanged (every commit is fsynced).
BENCH_SETTINGS = (
    "server.memory.pagecache.size=1500m",
    "internal.dbms.index.vector.population_ram_buffer_size=64",
)


def _settings(port: int) -> list[str]:
    address = f"127.0.0.1:{port}"
    return [
        "server.bolt.enabled=true",
        f"server.bolt.listen_address={address}",
        f"server.bolt.advertised_address={address}",
        "dbms.security.auth_enabled=true",
        "server.config.strict_validation.enabled=false",
        "server.memory.pagecache.size=256m",
        "db.tx_log.rotation.retention_policy=1 files",
        "dbms.usage_report.enabled=false",
    ]


def start(
    home: Path,
    timeout: float = 240.0,
    *,
    quick_jit: bool = True,
    settings: tuple[str, ...] = (),
    heap: str = "1g",
) -> Neo4jServer:
    """Start a server with its data under ``home``; set the known password; return it.
    ``quick_jit=False`` runs the JVM's full JIT, as a production server does;
    ``settings`` (``name=value``) are added to the server's configuration, after the
    defaults, and ``heap`` is the JVM's maximum heap (``BENCH_SETTINGS`` and ``"2g"``
    for benchmarks)."""
    java = shutil.which("java")
    if java is None:
        raise ServerError("Java (17+) is not installed: it is needed to run the Neo4j test server")
    lib = ensure_jars()
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / "launcher.log"
    log = log_path.open("w")
    flags = [*JVM_FLAGS, f"-Xmx{heap}", *([QUICK_JIT] if quick_jit else [])]
    cmd = [java, *flags, "-cp", f"{lib}/*", str(HERE / "Launcher.java"), str(home / "dbms")]
    began = time.monotonic()
    proc = subprocess.Popen(
        [*cmd, *_merged(_settings(port), settings)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    server = Neo4jServer(f"bolt://127.0.0.1:{port}", USERNAME, PASSWORD, proc, log_path, 0.0, home)
    try:
        _wait_ready(server, began + timeout)
        _set_initial_password(server, began + timeout)
    except BaseException:
        server.stop(timeout=20)
        raise
    server.start_seconds = time.monotonic() - began
    return server


def _merged(defaults: list[str], overrides: tuple[str, ...]) -> list[str]:
    """``defaults`` with each setting named in ``overrides`` replaced, others appended."""
    merged = dict(line.split("=", 1) for line in defaults)
    merged.update(line.split("=", 1) for line in overrides)
    return [f"{name}={value}" for name, value in merged.items()]


def _wait_ready(server: Neo4jServer, deadline: float) -> None:
    lines = server._stdout
    reader = threading.Thread(target=_pump, args=(server.process, lines), daemon=True)
    reader.start()
    while READY_LINE not in lines:
        if server.process.poll() is not None:
            raise ServerError(
                f"Neo4j exited with code {server.process.returncode} before it was ready; "
                f"log:\n{_tail(server.log_path)}"
            )
        if time.monotonic() > deadline:
            raise ServerError(f"Neo4j was not ready in time; log:\n{_tail(server.log_path)}")
        time.sleep(0.2)


def _pump(proc: subprocess.Popen[str], lines: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.strip())


def _set_initial_password(server: Neo4jServer, deadline: float) -> None:
    """Replace the default ``neo4j``/``neo4j`` credentials (which must be changed first)."""
    from neo4j import GraphDatabase
    from neo4j.exceptions import AuthError, ServiceUnavailable

    while True:
        try:
            auth = (USERNAME, "neo4j")
            with (
                GraphDatabase.driver(server.uri, auth=auth, connection_timeout=5) as driver,
                driver.session(database="system") as session,
            ):
                session.run(
                    "ALTER CURRENT USER SET PASSWORD FROM $old TO $new",
                    old="neo4j",
                    new=server.password,
                ).consume()
            return
        except ServiceUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        except AuthError:
            return  # already set (a reused home directory)


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


if __name__ == "__main__":
    srv = start(Path(tempfile.mkdtemp(prefix="neo4j-dev-")))
    sys.stderr.write(
        f"{srv.uri} user={srv.username} password={srv.password} "
        f"started in {srv.start_seconds:.1f}s; Enter stops it\n"
    )
    try:
        sys.stdin.readline()
    finally:
        srv.stop()
