"""The release workflow's build-check-install-smoke steps, run here on every change.

release/build_check.py builds every distribution, runs ``twine check``, checks the
wheels' metadata, installs ``smriti-server`` from the built wheels into a new virtual
environment and talks to the installed ``smriti`` over MCP stdio. Marked ``release``
(about 20 s with a warm uv cache; it reads third-party wheels through uv's cache).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.release


def load_build_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_check", ROOT / "release/build_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(600)
def test_build_check_install_smoke(tmp_path: Path) -> None:
    assert shutil.which("uv") and shutil.which("twine"), "run under `uv run` (uv, twine)"
    report_file = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "release/build_check.py"),
            "--dist",
            str(tmp_path / "dist"),
            "--report",
            str(report_file),
        ],
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(report_file.read_text())
    version = load_build_check().source_version()
    assert report["version"] == version
    assert len(report["wheels"]) == len(load_build_check().pyprojects())
    assert all(f"-{version}-py3-none-any.whl" in name for name in report["wheels"])
    assert report["smoke"]["smoke"] == "ok" and report["smoke"]["recalled"] >= 1
    assert report["smoke"]["version"] == version
    assert {"smriti_store", "smriti_recall", "smriti_manage"} <= set(report["smoke"]["tools"])
    assert "PASSED" in done.stdout and "FAILED" not in done.stdout


def test_metadata_check_refuses_a_wheel_of_another_version(tmp_path: Path) -> None:
    bc = load_build_check()
    wheel = tmp_path / "smriti_core-0.0.1-py3-none-any.whl"
    metadata = "Metadata-Version: 2.4\nName: smriti-core\nVersion: 0.0.1\nLicense-Expression: MIT\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("smriti_core-0.0.1.dist-info/METADATA", metadata)
        zf.writestr("smriti_core-0.0.1.dist-info/licenses/LICENSE", "MIT")
    with pytest.raises(bc.CheckFailed, match="has version 0.0.1"):
        bc.check_metadata([wheel], bc.source_version())


def test_metadata_check_refuses_a_stale_pin(tmp_path: Path) -> None:
    bc = load_build_check()
    version = bc.source_version()
    wheel = tmp_path / f"smriti_server-{version}-py3-none-any.whl"
    metadata = (
        f"Metadata-Version: 2.4\nName: smriti-server\nVersion: {version}\n"
        "License-Expression: MIT\nRequires-Dist: smriti-core>=0.0.1,<0.1\n"
    )
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"smriti_server-{version}.dist-info/METADATA", metadata)
        zf.writestr(f"smriti_server-{version}.dist-info/licenses/LICENSE", "MIT")
    with pytest.raises(bc.CheckFailed, match="requires smriti-core>=0.0.1,<0.1"):
        bc.check_metadata([wheel], version)
