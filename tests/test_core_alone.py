"""The framework without any plugin: a virtual environment with only smriti-core (no
Kùzu, no server drivers) runs the engine's tests on the core's reference backend."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The core's own tests that need no plugin.
CORE_TESTS = ["tests/test_engine.py", "tests/test_working_set.py", "tests/test_sqlite_backend.py"]
TEST_TOOLS = ["pytest>=8", "pytest-timeout>=2.3", "hypothesis>=6.100", "anyio>=4"]


def test_the_engine_tests_pass_with_only_the_core_installed(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    assert uv, "uv is needed to build the core-only environment (the README's prerequisite)"
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(python), str(ROOT), *TEST_TOOLS],
        check=True, env=env, timeout=600,
    )  # fmt: skip
    probe = "import importlib.util as u; print(u.find_spec('smriti_backend_kuzu'))"
    installed = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=True
    )
    assert installed.stdout.strip() == "None", "Kùzu must not be installed in this environment"
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *CORE_TESTS],
        cwd=ROOT, env={**env, "SMRITI_TEST_BACKEND": "sqlite"},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    tail = "\n".join(run.stdout.splitlines()[-15:])
    if run.returncode != 0:
        pytest.fail(f"core tests failed without plugins:\n{tail}\n{run.stderr[-2000:]}")
    assert " passed" in tail and "failed" not in tail
