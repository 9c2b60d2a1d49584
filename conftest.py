"""Test-run settings shared by the core's and every plugin's tests.

Tests run ``smriti`` subprocesses on stores in temporary directories, and each such
store gets an owner process (``smriti.owner``): a short idle time lets those leave soon
after their test, and any still running when the session ends are stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator

import pytest

os.environ.setdefault("SMRITI_OWNER_IDLE", "5")

#: ``kuzu`` and ``ladybug`` cannot be imported into one process: a run collects the
#: tests of one engine, and ``tests/test_engines_apart.py`` runs LadybugDB's (with the
#: shared embedded-graph tests on it) in a child pytest with SMRITI_TEST_ENGINE=ladybug.
_ENGINE = os.environ.get("SMRITI_TEST_ENGINE", "kuzu").strip().lower() or "kuzu"
collect_ignore = (
    ["plugins/smriti-backend-ladybug"] if _ENGINE != "ladybug" else ["plugins/smriti-backend-kuzu"]
)


@pytest.fixture(scope="session", autouse=True)
def _stop_leftover_owners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    for info in tmp_path_factory.getbasetemp().glob("**/owner.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.kill(int(json.loads(info.read_text())["pid"]), signal.SIGTERM)
