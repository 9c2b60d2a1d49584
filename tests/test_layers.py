"""The import contracts of ``[tool.importlinter]`` in pyproject.toml hold, and they catch
a wrong import: a plugin reaching into the engine or the core's settings fails."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: A plugin package made up for the test: it is analysed under the real contracts.
PROBE = "smriti_layer_probe"


def _lint(
    config: Path, cwd: Path, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(config)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _contracts() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def test_the_import_contracts_hold() -> None:
    done = _lint(ROOT / "pyproject.toml", ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    count = len(_contracts()["contracts"])
    assert f"Contracts: {count} kept, 0 broken." in done.stdout, done.stdout


def test_every_plugin_package_is_under_the_contracts() -> None:
    # A plugin added to the workspace and forgotten here would go unchecked.
    packages = {
        init.parent.name
        for pattern in ("plugins/*/*/__init__.py", "examples/*/*/__init__.py")
        for init in ROOT.glob(pattern)
        if init.parent.name != "tests"
    }
    config = _contracts()
    [public] = [c for c in config["contracts"] if c["id"] == "plugins-public"]
    assert packages and packages <= set(config["root_packages"])
    assert packages <= set(public["source_modules"])


def _toml(value: Any) -> str:
    """``value`` (str, bool, list of str) as a TOML value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _probe_config(tmp_path: Path) -> Path:
    """pyproject.toml's contracts with ``PROBE`` as one more plugin package."""
    config = _contracts()
    lines = ["[tool.importlinter]"]
    lines.append(f"root_packages = {_toml([*config['root_packages'], PROBE])}")
    for contract in config["contracts"]:
        lines.append("\n[[tool.importlinter.contracts]]")
        for key, value in contract.items():
            if contract["id"] == "plugins-public" and key == "source_modules":
                value = [*value, PROBE]
            lines.append(f"{key} = {_toml(value)}")
    path = tmp_path / "contracts.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _probe(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    package = tmp_path / "src" / PROBE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A made-up plugin."""\n')
    (package / "backend.py").write_text(source)
    return _lint(_probe_config(tmp_path), tmp_path, pythonpath=tmp_path / "src")


@pytest.mark.parametrize(
    ("line", "reached"),
    [
        ("from smriti.engine import core\n", "smriti.engine"),
        ("from smriti.config import Settings\n", "smriti.config"),
        ("from smriti.index.indexed import IndexedBackend\n", "smriti.index"),
    ],
)
def test_a_plugin_importing_the_core_internals_fails(
    tmp_path: Path, line: str, reached: str
) -> None:
    done = _probe(tmp_path, line)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{PROBE} is not allowed to import {reached}" in done.stdout, done.stdout


def test_a_plugin_importing_the_public_packages_passes(tmp_path: Path) -> None:
    # The same probe with allowed imports: the failures above are the imports' doing.
    done = _probe(
        tmp_path,
        "from smriti import ConfigError, get_logger\n"
        "from smriti.backend import StorageBackend, VectorCache\n"
        "from smriti.backend.text import index_terms\n",
    )
    assert done.returncode == 0, done.stdout + done.stderr
