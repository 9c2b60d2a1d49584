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


@pytest.fixture(scope="session", autouse=True)
def _stop_leftover_owners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    for info in tmp_path_factory.getbasetemp().glob("**/owner.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.kill(int(json.loads(info.read_text())["pid"]), signal.SIGTERM)
