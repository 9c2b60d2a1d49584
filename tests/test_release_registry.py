"""server.json, the MCP Registry entry, against the registry's published JSON schema
(vendored under tests/data/mcp-registry/ with its source) and the registry's ownership
rule for PyPI packages: the package README carries ``mcp-name: <server name>``."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from smriti.doctor.settings_reference import MEANINGS

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests/data/mcp-registry/server.schema.2025-12-11.json"
pytestmark = pytest.mark.release


def server_json() -> dict[str, Any]:
    return json.loads((ROOT / "server.json").read_text())


def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())


def test_server_json_is_valid_against_the_registry_schema() -> None:
    entry = server_json()
    assert entry["$schema"] == json.loads(SCHEMA.read_text())["$id"]
    errors = [f"{list(e.path)}: {e.message}" for e in validator().iter_errors(entry)]
    assert errors == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("description", "x" * 101), ("name", "no-slash"), ("packages", [{"registryType": "pypi"}])],
)
def test_the_schema_refuses_a_broken_entry(field: str, value: object) -> None:
    entry = copy.deepcopy(server_json())
    entry[field] = value
    assert list(validator().iter_errors(entry))


def test_versions_and_package_agree_with_the_pypi_distribution() -> None:
    entry = server_json()
    server = tomllib.loads((ROOT / "packages/smriti-server/pyproject.toml").read_text())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    (package,) = entry["packages"]
    assert entry["version"] == package["version"] == version
    assert package["registryType"] == "pypi" and package["registryBaseUrl"] == "https://pypi.org"
    assert package["identifier"] == server["project"]["name"]
    assert package["transport"] == {"type": "stdio"}
    assert "smriti-server" in server["project"]["scripts"]  # what `uvx smriti-server` runs


def test_environment_variables_are_real_settings() -> None:
    (package,) = server_json()["packages"]
    names = [v["name"] for v in package["environmentVariables"]]
    assert names and all(name in MEANINGS for name in names)
    secret = {v["name"] for v in package["environmentVariables"] if v.get("isSecret")}
    assert secret == {n for n in names if n.endswith("_API_KEY")}


def test_package_readme_carries_the_ownership_marker() -> None:
    name = server_json()["name"]
    server = tomllib.loads((ROOT / "packages/smriti-server/pyproject.toml").read_text())
    readme = (ROOT / "packages/smriti-server" / server["project"]["readme"]).read_text()
    # the registry wants the token followed by a boundary (whitespace or the comment close)
    assert re.search(rf"mcp-name: {re.escape(name)}(\s|-->)", readme)
    assert f"<!-- mcp-name: {name} -->" in (ROOT / "README.md").read_text()
