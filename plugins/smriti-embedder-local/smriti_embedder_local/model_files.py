"""Finding a sentence-embedding model on disk, or on the Hugging Face Hub by name.

(The default model, pinned to a revision and checked by sha256, is in ``pinned``.)

A model directory holds an ONNX file (``model.onnx``, ``onnx/model.onnx`` or a single
``*.onnx``) and the tokenizer as ``tokenizer.json``. The sentence-transformers files
``1_Pooling/config.json`` (pooling mode) and ``sentence_bert_config.json``
(``max_seq_length``) are read when present; without them pooling is mean pooling and the
sequence limit is 256 tokens, which is what all-MiniLM-L6-v2 expects.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from smriti import ConfigError

DEFAULT_MAX_LENGTH = 256
ONNX_CANDIDATES = (
    "model.onnx",
    "onnx/model.onnx",
    "model_quantized.onnx",
    "onnx/model_quantized.onnx",
)
HUB_FILES = ("tokenizer.json", "1_Pooling/config.json", "sentence_bert_config.json")
_REPO_ID = re.compile(r"^(?:hf:)?([A-Za-z0-9][\w.-]*/[\w.-]+)$")


@dataclass(slots=True, frozen=True)
class ModelFiles:
    """The files of one model and how to pool its token vectors."""

    name: str
    onnx_path: Path
    tokenizer_path: Path
    pooling: str = "mean"
    max_length: int = DEFAULT_MAX_LENGTH
    #: ``Embedder.similarity_baseline``; None: known weights' (``baselines``), else 0.
    similarity_baseline: float | None = None

    def fingerprint(self) -> str:
        """The first 12 hex digits of the ONNX file's sha256: the model's identity."""
        digest = hashlib.sha256()
        with self.onnx_path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()[:12]


def find_onnx(directory: Path) -> Path | None:
    """The model's ONNX file in ``directory``: a known name, else the only ``*.onnx``."""
    for name in ONNX_CANDIDATES:
        if (directory / name).is_file():
            return directory / name
    found = sorted(directory.glob("*.onnx")) + sorted(directory.glob("onnx/*.onnx"))
    return found[0] if len(found) == 1 else None


def from_directory(directory: Path, variable: str = "SMRITI_LOCAL_MODEL") -> ModelFiles:
    """The model in ``directory``, or ConfigError saying which file is missing."""
    directory = directory.expanduser()
    if not directory.is_dir():
        raise ConfigError(
            f"{variable}={str(directory)!r} is not a directory; point it at a folder with "
            "an ONNX model file (model.onnx) and tokenizer.json"
        )
    onnx = find_onnx(directory)
    if onnx is None:
        raise ConfigError(
            f"{variable}={str(directory)!r} has no ONNX model: expected model.onnx, "
            "onnx/model.onnx or exactly one *.onnx file"
        )
    tokenizer = directory / "tokenizer.json"
    if not tokenizer.is_file():
        raise ConfigError(
            f"{variable}={str(directory)!r} has no tokenizer.json (the Hugging Face "
            "tokenizers file that belongs to the model)"
        )
    return ModelFiles(
        name=directory.name or str(directory),
        onnx_path=onnx,
        tokenizer_path=tokenizer,
        pooling=_pooling(directory),
        max_length=_max_length(directory),
    )


def _pooling(directory: Path) -> str:
    config = _read_json(directory / "1_Pooling" / "config.json")
    if config.get("pooling_mode_cls_token"):
        return "cls"
    return "mean"


def _max_length(directory: Path) -> int:
    value = _read_json(directory / "sentence_bert_config.json").get("max_seq_length")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_MAX_LENGTH


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def repo_id(value: str) -> str | None:
    """The Hub repository id in ``value`` (``org/name`` or ``hf:org/name``), else None."""
    match = _REPO_ID.fullmatch(value.strip())
    return match.group(1) if match else None


def from_hub(repo: str) -> ModelFiles:
    """Download a model by repository id (``SMRITI_LOCAL_MODEL=org/name``), unpinned.

    Uses the repository's default branch and the Hugging Face cache; needs internet
    access unless cached. Raises ConfigError with the reason when the model cannot be had.
    """
    from huggingface_hub import hf_hub_download

    try:
        tokenizer = Path(hf_hub_download(repo, "tokenizer.json"))
        onnx = Path(hf_hub_download(repo, "onnx/model.onnx"))
        for extra in HUB_FILES[1:]:
            with contextlib.suppress(Exception):  # optional: defaults apply without them
                hf_hub_download(repo, extra)
    except Exception as exc:
        raise ConfigError(
            f"could not get the embedding model {repo!r} from the Hugging Face Hub "
            f"({type(exc).__name__}); this needs internet access, or set SMRITI_LOCAL_MODEL "
            "to a directory with model.onnx and tokenizer.json"
        ) from exc
    root = tokenizer.parent
    return ModelFiles(
        name=repo.rsplit("/", 1)[-1],
        onnx_path=onnx,
        tokenizer_path=tokenizer,
        pooling=_pooling(root),
        max_length=_max_length(root),
    )
