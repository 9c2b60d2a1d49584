"""LadybugDB's tests, in a pytest process of their own.

``kuzu`` and ``ladybug`` cannot be imported into one Python process (the second import
fails, or the interpreter crashes), and this run holds Kùzu. The root conftest keeps
LadybugDB's plugin tests out of it; this test runs them in a child pytest with
``SMRITI_TEST_ENGINE=ladybug``: the plugin's conformance and recall-equality suites, the
shared embedded-graph tests (owner-free durability: write-behind journal, kill -9, disk
full, damaged store refused, erase) and the engine and working-set tests (snapshots,
fast start) on LadybugDB. A failure here fails the run with the child's tail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LADYBUG_TESTS = [
    "plugins/smriti-backend-ladybug/tests",
    "plugins/smriti-embedded-graph/tests",
    "tests/test_engine.py",
    "tests/test_working_set.py",
]


def test_ladybug_tests_pass_in_a_process_of_their_own() -> None:
    env = {**os.environ, "SMRITI_TEST_ENGINE": "ladybug", "SMRITI_TEST_BACKEND": "ladybug"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *LADYBUG_TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    tail = "\n".join(run.stdout.splitlines()[-25:])
    if run.returncode != 0:
        pytest.fail(
            f"LadybugDB tests failed (exit {run.returncode}):\n{tail}\n{run.stderr[-2000:]}"
        )
    assert " passed" in tail and "failed" not in tail and "error" not in tail.lower()
    assert "skipped" not in tail or "no fts/vector extension" in run.stdout, tail


def test_the_main_run_never_imports_ladybug() -> None:
    """This process holds Kùzu; importing LadybugDB here would fail or crash."""
    assert "ladybug" not in sys.modules
