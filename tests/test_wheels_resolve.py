"""``pip install smriti-server`` finds wheels for every platform and Python we support.

Builds every distribution of the workspace into a temporary folder and resolves
``smriti-server`` against them and PyPI with ``--only-binary :all:`` for each platform
and Python of the support matrix (as ``uv pip compile --python-platform`` sees it: no
such machine is needed). A platform whose resolution fails would make pip build C++
from source on the user's machine; the test fails with the resolver's message. It needs
PyPI: a network failure fails it too (never a skip).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = [
    "x86_64-unknown-linux-gnu",
    "aarch64-unknown-linux-gnu",
    "aarch64-apple-darwin",
    "x86_64-apple-darwin",
    "x86_64-pc-windows-msvc",
    "aarch64-pc-windows-msvc",
]
PYTHONS = ["3.12", "3.13", "3.14"]
#: Where Kùzu 0.11.3 (archived) has wheels: it comes along there, for stores made with it.
KUZU_WHEELS = {
    (p, v)
    for p in PLATFORMS
    for v in PYTHONS
    if "linux" in p or (v != "3.14" and p != "aarch64-pc-windows-msvc")
}
#: ONNX Runtime (the local embedder) has no wheel for Intel macOS on Python 3.14.
NO_ONNXRUNTIME = {("x86_64-apple-darwin", "3.14")}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    assert uv, "uv is needed to build and resolve the wheels (the README's prerequisite)"
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [uv, "build", "--all-packages", "--wheel", "-q", "-o", str(out)],
        cwd=ROOT, check=True, timeout=900,
    )  # fmt: skip
    assert (out / "smriti_server-0.1.0-py3-none-any.whl").exists(), sorted(out.iterdir())
    return out


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_smriti_server_resolves_to_wheels_only(wheels: Path, platform: str, python: str) -> None:
    env = {**os.environ, "MACOSX_DEPLOYMENT_TARGET": "15.0"}
    done = subprocess.run(
        [shutil.which("uv") or "uv", "pip", "compile", "-", "--python-platform", platform,
         "--python-version", python, "--only-binary", ":all:", "--find-links", str(wheels),
         "--no-header", "--no-annotate", "-q"],
        input="smriti-server\n", cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"smriti-server has no wheels-only install on {platform}, Python {python}:\n"
                    f"{done.stderr[-3000:]}")  # fmt: skip
    pinned = set(re.findall(r"^([a-z0-9_.-]+)==", done.stdout, re.MULTILINE))
    assert "ladybug" in pinned, "the default engine, LadybugDB, must come everywhere"
    assert ("kuzu" in pinned) == ((platform, python) in KUZU_WHEELS), pinned
    assert ("onnxruntime" in pinned) == ((platform, python) not in NO_ONNXRUNTIME), pinned
