"""The Claude Desktop extension (mcpb/): validated and packed with the official
``@anthropic-ai/mcpb`` CLI from npm, its tools compared with the server's own, and the
packed bundle started the way its manifest says and smoke-tested over MCP stdio.

Needs Node's npx (the npm registry); without it the tests fail, they do not skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.doctor.settings_reference import MEANINGS

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = json.loads((ROOT / "mcpb/manifest.json").read_text())
pytestmark = pytest.mark.release


def load_pack_mcpb() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pack_mcpb", ROOT / "release/pack_mcpb.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pack(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "release/pack_mcpb.py"),
            "--out",
            str(tmp_path / "s.mcpb"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.timeout(900)
def test_the_cli_validates_and_packs_the_bundle(tmp_path: Path) -> None:
    done = pack(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Manifest schema validation passes!" in done.stdout
    with zipfile.ZipFile(tmp_path / "s.mcpb") as zf:
        names = set(zf.namelist())
        packed = json.loads(zf.read("manifest.json"))
    assert names == {"manifest.json", "pyproject.toml", "server/main.py"}
    assert packed == MANIFEST


@pytest.mark.timeout(900)
def test_the_cli_refuses_a_broken_manifest(tmp_path: Path) -> None:
    broken = {**MANIFEST, "server": {**MANIFEST["server"], "type": "ruby"}}
    (tmp_path / "manifest.json").write_text(json.dumps(broken))
    with pytest.raises(SystemExit, match="validate manifest.json"):
        load_pack_mcpb().npx("validate", "manifest.json", cwd=tmp_path)


def test_user_settings_are_real_settings_and_the_key_is_sensitive() -> None:
    config, env = MANIFEST["user_config"], MANIFEST["server"]["mcp_config"]["env"]
    assert config["storage_location"]["type"] == "directory"
    assert config["llm_api_key"]["sensitive"] is True
    assert not any(c.get("required") for c in config.values())  # zero configuration
    assert set(env) <= set(MEANINGS)
    placeholders = {m for v in env.values() for m in re.findall(r"\$\{user_config\.(\w+)\}", v)}
    assert placeholders == set(config)


async def server_tools(store: Path) -> dict[str, str]:
    env = {**os.environ, "STORAGE_LOCATION": str(store), "HF_HUB_OFFLINE": "1"}
    env.pop("ACCESSING_USER", None)
    params = StdioServerParameters(command=sys.executable, args=["-m", "smriti"], env=env)
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            return {t.name: t.description or "" for t in (await client.list_tools()).tools}


def first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".") + "."


def test_manifest_tools_are_the_servers_tools(tmp_path: Path) -> None:
    served = anyio.run(server_tools, tmp_path / "store")
    listed = {t["name"]: t["description"] for t in MANIFEST["tools"]}
    assert set(listed) == set(served)
    for name, description in listed.items():
        assert description == first_sentence(served[name]), name


@pytest.mark.timeout(900)
def test_the_packed_bundle_runs_as_its_manifest_says(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = subprocess.run(
        ["uv", "build", "--all-packages", "--wheel", "--out-dir", str(dist)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    done = pack(tmp_path, "--smoke-with", str(dist))
    assert done.returncode == 0, done.stdout + done.stderr
    smoke = json.loads(done.stdout.split("smoke: ", 1)[1])
    assert smoke["smoke"] == "ok" and smoke["recalled"] >= 1
    assert smoke["version"] == MANIFEST["version"]


async def stats_through_the_entry_point(env: dict[str, str]) -> dict[str, object]:
    params = StdioServerParameters(
        command=sys.executable, args=[str(ROOT / "mcpb/server/main.py")], env=env
    )
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            stats = await client.call_tool("smriti_manage", {"action": "stats"})
            assert not stats.is_error, stats
            return stats.structured_content["stats"]


def test_settings_left_empty_in_the_extension_mean_the_defaults(tmp_path: Path) -> None:
    from smriti.config import Settings

    env = {**os.environ, "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    env.update(
        STORAGE_LOCATION=str(tmp_path / "store"),
        ACCESSING_USER="",  # a blank user name is otherwise refused at startup
        LLM_API_KEY="${user_config.llm_api_key}",  # a host that left it unexpanded
    )
    stats = anyio.run(stats_through_the_entry_point, env)
    assert stats["user"] == Settings.from_env({}).accessing_user
