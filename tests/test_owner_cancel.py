"""A killed ``smriti import`` or ``smriti consolidate`` stops in the store's owner
process too, and a second import is refused while the first runs (issue 36: the owner
went on importing, and a second import passed the "empty store only" check).

Real processes: the ``smriti`` command, its owner process, a Kùzu store; the import
file is a real export, grown to enough memories that the import takes a while."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from smriti.testing.owner_load import load_env, smriti_command

#: Memories in the grown export: two import batches (``ENGRAM_BATCH``).
GROWN = 14_000
#: Associations of each memory in the export a consolidation is killed on (clustering
#: them takes long enough to kill it while it runs).
LINKED = 3


def _cli(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [smriti_command(), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def _status(env: dict[str, str]) -> dict:
    done = _cli(env, "owner", "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _wait(predicate, seconds: float = 120.0) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="module")
def small_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export of a store made by the CLI."""
    root = tmp_path_factory.mktemp("source")
    env = load_env(root / "store", "source")
    try:
        for n in range(12):
            stored = _cli(env, "store", f"Source memory {n}: Priya moved the Berlin offsite")
            assert stored.returncode == 0, stored.stderr
        small = root / "small.jsonl"
        assert _cli(env, "export", str(small)).returncode == 0
    finally:
        _cli(env, "owner", "stop")
    return small


@pytest.fixture(scope="module")
def grown_export(small_export: Path) -> Path:
    """The small export's memories copied to GROWN (new ids, their links with them)."""
    return _grow(small_export, small_export.with_name("grown.jsonl"))


@pytest.fixture(scope="module")
def linked_export(small_export: Path) -> Path:
    """``grown_export`` with LINKED associations from each memory."""
    return _grow(small_export, small_export.with_name("linked.jsonl"), LINKED)


def _grow(small: Path, out: Path, linked: int = 0) -> Path:
    records = [json.loads(line) for line in small.read_text().splitlines()]
    header, trailer = records[0], records[-1]
    engrams = [r for r in records if r["kind"] == "engram"]
    links = [r for r in records if r["kind"] == "link"]
    cues = [r for r in records if r["kind"] == "cue"]
    counts = {"engrams": 0, "cues": len(cues), "links": 0, "associations": 0}
    counts["cooccurrences"] = 0
    with out.open("w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for cue in cues:
            f.write(json.dumps(cue) + "\n")
        for n in range(GROWN):
            source = engrams[n % len(engrams)]
            new_id = str(uuid.UUID(int=n + 1))
            f.write(json.dumps({**source, "id": new_id, "content": f"{n}: {source['content']}"}))
            f.write("\n")
            for link in (lk for lk in links if lk["engram_id"] == source["id"]):
                f.write(json.dumps({**link, "engram_id": new_id}) + "\n")
                counts["links"] += 1
            counts["engrams"] += 1
        for n in range(GROWN if linked else 0):
            for step in (1, 7, 13)[:linked]:
                target = str(uuid.UUID(int=(n + step) % GROWN + 1))
                edge = {"kind": "association", "source_id": str(uuid.UUID(int=n + 1))}
                edge.update(target_id=target, strength=0.8, relation_type="semantic")
                f.write(json.dumps({**edge, "created_at": header["created_at"]}) + "\n")
                counts["associations"] += 1
        f.write(json.dumps({**trailer, "counts": counts}) + "\n")
    return out


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    environment = load_env(tmp_path / "store", "target", LOG_LEVEL="info", SMRITI_OWNER_IDLE="60")
    assert _cli(environment, "stats").returncode == 0  # the owner is up before the kill
    yield environment
    _cli(environment, "owner", "stop")


def _owner_log(env: dict[str, str]) -> str:
    return (Path(env["STORAGE_LOCATION"]) / "target" / "owner.log").read_text()


def _start_and_kill(env: dict[str, str], args: list[str], sig: int) -> None:
    """Start ``smriti ARGS``, wait until its request runs in the owner, kill it."""
    proc = subprocess.Popen(
        [smriti_command(), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # A shell without job control starts background jobs with SIGINT ignored, and an
        # ignored signal stays ignored in every child: give the command a terminal's.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert _wait(lambda: _status(env)["in_flight"] >= 1), "the operation never started"
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _engrams(env: dict[str, str]) -> int:
    return json.loads(_cli(env, "stats", "--json").stdout)["engrams"]


def test_a_second_import_while_one_runs_is_refused(env: dict[str, str], grown_export: Path) -> None:
    first = subprocess.Popen(
        [smriti_command(), "import", str(grown_export)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert _wait(lambda: _status(env)["in_flight"] >= 1), "the import never started"
        second = _cli(env, "import", str(grown_export))
        assert second.returncode == 2, second.stderr  # never a second import on the first
        assert "an import into the store of user 'target' is already running" in second.stderr
        assert first.wait(timeout=600) == 0, first.stderr.read() if first.stderr else ""
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert _engrams(env) == GROWN


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_import_stops_in_the_owner(
    env: dict[str, str], grown_export: Path, sig: int
) -> None:
    _start_and_kill(env, ["import", str(grown_export)], sig)
    assert _wait(lambda: _status(env)["in_flight"] == 0), "the import never stopped"
    log = _owner_log(env)
    assert "operation stopped: its process left" in log, log[-3000:]
    assert _engrams(env) < GROWN  # it stopped between batches, before the end
    finished = _cli(env, "import", "--merge", str(grown_export))  # completes it
    assert finished.returncode == 0, finished.stderr
    assert _engrams(env) == GROWN


def test_a_killed_consolidation_stops_in_the_owner(
    env: dict[str, str], linked_export: Path
) -> None:
    assert _cli(env, "import", str(linked_export)).returncode == 0
    _start_and_kill(env, ["consolidate"], signal.SIGKILL)
    assert _wait(lambda: _status(env)["in_flight"] == 0), "the consolidation never stopped"
    log = _owner_log(env)
    assert '"op": "consolidate"' in log and "operation stopped: its process left" in log, log
    again = _cli(env, "consolidate", "--json")  # the store is fine: a full run works
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["clusters"] > 0
