"""A STORAGE_LOCATION that cannot be written: the server and every command stop at
startup with one line naming STORAGE_LOCATION, the path and what to do, and ``smriti
doctor`` reports a failure (issue 36: a bare OS error, and doctor said "ok").

The tests run as root, whom file modes do not stop, so "cannot be written" is a
read-only file system (a tmpfs the test mounts) or a path under a regular file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from smriti.testing.owner_load import load_env, smriti_command

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "storage-test", "version": "0"},
    },
}


def _run(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [smriti_command(), *args], env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


def _assert_one_clear_line(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Exit 2, no traceback, and one ``smriti: error:`` line saying ``expected``."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("smriti: error:")]
    for text in ("STORAGE_LOCATION=", "point STORAGE_LOCATION", *expected):
        assert text in line, line


def _assert_everything_refuses(env: dict[str, str], *expected: str) -> None:
    for args in (["stats"], ["store", "a memory"], ["recall", "memory"]):
        _assert_one_clear_line(_run(env, *args), *expected)
    served = _run(env, stdin=json.dumps(INIT) + "\n")  # the stdio MCP server
    _assert_one_clear_line(served, *expected)
    doctor = _run(env, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    [store] = [x for x in doctor.stdout.splitlines() if x.strip().startswith("FAIL  store")]
    for text in ("point STORAGE_LOCATION", *expected):
        assert text in store, store


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs of its own (it is remounted read-only by the tests)."""
    root = tmp_path / "disk"
    root.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a file system needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(root)], check=True)
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def _read_only(root: Path) -> None:
    for _ in range(50):  # an owner that just stopped may still be closing its files
        if subprocess.run(["mount", "-o", "remount,ro", str(root)]).returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"{root} could not be made read-only")


def test_a_storage_location_under_a_file(tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a directory")
    env = load_env(blocker / "smriti", "nobody-writes")
    _assert_everything_refuses(env, str(blocker), "is a file")


def test_a_read_only_storage_location(mounted: Path) -> None:
    _read_only(mounted)
    env = load_env(mounted, "fresh")
    _assert_everything_refuses(env, str(mounted), "read-only file system")


def test_an_existing_store_on_a_file_system_made_read_only(mounted: Path) -> None:
    env = load_env(mounted, "existing", SMRITI_OWNER_IDLE="1")
    stored = _run(env, "store", "a memory kept before the disk went read-only")
    assert stored.returncode == 0, stored.stderr
    assert _run(env, "owner", "stop").returncode == 0
    doctor = _run(env, "doctor")
    assert "FAIL  store" not in doctor.stdout  # writable: no failure to report
    _read_only(mounted)
    _assert_everything_refuses(env, str(mounted / "existing"), "read-only file system")
