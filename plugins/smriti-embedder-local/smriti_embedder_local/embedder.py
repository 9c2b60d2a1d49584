"""The local embedder: a sentence-transformers model exported to ONNX, run on the CPU.

onnxruntime runs the transformer and ``tokenizers`` prepares its input, so no torch is
needed. Token vectors are mean-pooled over the attention mask (or the CLS vector is
taken, when the model's pooling config says so) and L2-normalised, which reproduces
sentence-transformers' output for models like all-MiniLM-L6-v2.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from smriti import ConfigError, Embedder, ProviderError, get_logger
from smriti_embedder_local.baselines import baseline_of
from smriti_embedder_local.deferred import (
    PinnedModelEmbedder,
)
from smriti_embedder_local.model_files import ModelFiles, from_directory, from_hub, repo_id
from smriti_embedder_local.pinned import cache_problems, cache_root, is_offline, spec_from_env
from smriti_embedder_local.settings import LOAD_TIMEOUT, LOCAL_MODEL, LOCAL_THREADS, SETTINGS

if TYPE_CHECKING:
    from smriti import DoctorCheck, Settings

log = get_logger(__name__)

#: Upper bound of onnxruntime's intra-op threads unless SMRITI_LOCAL_THREADS says otherwise.
MAX_DEFAULT_THREADS = 4


class LocalEmbedder(Embedder):
    """Sentence embeddings from a local ONNX model (all-MiniLM-L6-v2 and the like).

    Configure with ``SMRITI_LOCAL_MODEL``: a directory holding ``model.onnx`` and
    ``tokenizer.json``, or a Hugging Face repository id (``org/name``) to download
    (internet access needed). Without it, ``from_settings`` returns the pinned default
    model (see ``smriti_embedder_local.pinned``), loaded in the background.
    ``SMRITI_LOCAL_THREADS`` bounds onnxruntime's threads (default: up to 4).
    Instances are thread-safe: the tokenizer is configured once and an onnxruntime
    session may be run from several threads at once.
    """

    name: ClassVar[str] = "local"
    priority: ClassVar[int] = 50
    description: ClassVar[str] = "local ONNX sentence embeddings (onnxruntime, no torch)"
    #: Texts per onnxruntime call; texts are sorted by length so padding stays small.
    batch_size: ClassVar[int] = 16
    #: What one more onnxruntime call costs, in padded token rows: a text joins a batch
    #: of shorter ones only while padding them to its length costs less (a question and
    #: its short cue names run as two calls, not as one padded to the question).
    call_tokens: ClassVar[int] = 16
    declared_settings = SETTINGS

    def __init__(self, files: ModelFiles, *, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.files = files
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or default_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(
                str(files.onnx_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._tokenizer = Tokenizer.from_file(str(files.tokenizer_path))
        except Exception as exc:
            raise ConfigError(
                f"could not load the local embedding model from {files.onnx_path.parent} "
                f"({type(exc).__name__}: {exc})"[:400]
            ) from exc
        pad_id, pad_token = _pad(self._tokenizer)
        self._tokenizer.no_padding()  # tokenizer.json may pad to a fixed length
        self._tokenizer.enable_truncation(max_length=files.max_length)
        self._tokenizer.enable_padding(direction="right", pad_id=pad_id, pad_token=pad_token)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()
        self._dims = int(self._run(["dimension probe"]).shape[1])
        fingerprint = files.fingerprint()
        self._model_id = f"local:{files.name}:{fingerprint}:{self._dims}"
        self._baseline = baseline_of(fingerprint, files.similarity_baseline)
        log.info(
            "local embedding model loaded",
            model=self._model_id,
            similarity_baseline=self._baseline,
            threads=options.intra_op_num_threads,
        )

    @classmethod
    def doctor_check(cls, settings: Settings, *, explicit: bool) -> DoctorCheck | None:
        """The model's state for ``smriti doctor``, without loading or downloading it."""
        from smriti_embedder_local.doctor import local_check

        return local_check(settings, explicit=explicit)

    @classmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> Embedder | None:
        """An embedder for ``SMRITI_LOCAL_MODEL``, else the pinned default model.

        With ``SMRITI_LOCAL_MODEL`` (a directory, or a Hub repository id) the model is
        loaded now; a set but unusable value is a ConfigError. Without it the pinned
        model (``pinned.DEFAULT_SPEC``, or ``SMRITI_MODEL_SPEC``) is returned as a
        ``PinnedModelEmbedder`` that downloads and loads in the background; under
        ``auto`` it falls back to the next embedder when the model cannot be had. An
        explicit ``local`` with the model neither cached nor downloadable
        (``HF_HUB_OFFLINE``) is a ConfigError.
        """
        env = settings.env or dict(os.environ)
        threads = LOCAL_THREADS.read(env)
        value = LOCAL_MODEL.read(env)
        if value:
            return cls(_configured_files(value), threads=threads)
        spec = spec_from_env(env)
        root = cache_root(env)
        if explicit and is_offline(env) and cache_problems(spec, root, full=False):
            raise ConfigError(
                "SMRITI_EMBEDDER=local needs a model: set SMRITI_LOCAL_MODEL to a directory "
                f"with model.onnx and tokenizer.json, or unset HF_HUB_OFFLINE so that "
                f"{spec.repo} can be downloaded into {spec.directory(root)}"
            )
        return PinnedModelEmbedder(
            spec,
            root,
            env,
            threads=threads,
            allow_fallback=not explicit,
            timeout=LOAD_TIMEOUT.read(env),
        )

    def __repr__(self) -> str:
        return f"LocalEmbedder({self._model_id!r})"

    @property
    def model_id(self) -> str:
        """``local:<model name>:<ONNX sha256 prefix>:<dims>``."""
        return self._model_id

    @property
    def similarity_baseline(self) -> float:
        """The baseline of these weights (``baselines.KNOWN_BASELINES``), else 0."""
        return self._baseline

    @property
    def dims(self) -> int:
        """The model's output dimension (384 for all-MiniLM-L6-v2)."""
        return self._dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in length-sorted batches: (n, dims) float32 unit rows."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out = np.zeros((len(texts), self._dims), dtype=np.float32)
        if not texts:
            return out
        encodings = self._encode(texts)  # once: padded to the longest, cut per batch
        lengths = [sum(e.attention_mask) for e in encodings]
        for rows in self._batches(lengths):
            width = max(lengths[i] for i in rows)
            out[rows] = self._infer([encodings[i] for i in rows], width)
        return out

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices of texts of these token ``lengths`` in batches of similar length,
        shortest first."""
        batches: list[list[int]] = []
        batch: list[int] = []
        for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
            padding = len(batch) * (lengths[i] - lengths[batch[-1]]) if batch else 0
            if batch and (len(batch) >= self.batch_size or padding > self.call_tokens):
                batches.append(batch)
                batch = []
            batch.append(i)
        batches.append(batch)
        return batches

    def close(self) -> None:
        """Nothing to release: the session is freed with the object."""

    def _encode(self, texts: Sequence[str]) -> list[Any]:
        return self._tokenizer.encode_batch([t if t.strip() else " " for t in texts])

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self._encode(texts)
        return self._infer(encodings, len(encodings[0].ids))

    def _infer(self, encodings: Sequence[Any], width: int) -> np.ndarray:
        """Run the model on ``encodings`` cut to ``width`` tokens (their padding is on
        the right, so only padding is cut)."""
        ids = np.asarray([e.ids[:width] for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask[:width] for e in encodings], dtype=np.int64)
        feed: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        feed = {k: v for k, v in feed.items() if k in self._inputs}
        try:
            output = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        except Exception as exc:
            raise ProviderError(
                f"local embedding model failed: {type(exc).__name__}: {exc}"
            ) from exc
        return _normalise(self._pool(output, mask))

    def _pool(self, output: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if output.ndim == 2:  # the export already pooled
            return output
        if self.files.pooling == "cls":
            return output[:, 0, :]
        weights = mask[:, :, None].astype(np.float32)
        return (output * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)


def default_threads() -> int:
    """onnxruntime intra-op threads: the CPU count, at most MAX_DEFAULT_THREADS."""
    return max(1, min(MAX_DEFAULT_THREADS, os.cpu_count() or 1))


def _configured_files(value: str) -> ModelFiles:
    path = Path(value).expanduser()
    repo = repo_id(value)
    if path.exists() or repo is None or value.startswith(("/", ".", "~")):
        return from_directory(path)
    return from_hub(repo)


def _pad(tokenizer: Any) -> tuple[int, str]:
    """The pad token of the tokenizer's own padding config, else ``[PAD]``."""
    config = tokenizer.padding or {}
    token = str(config.get("pad_token") or "[PAD]")
    pad = tokenizer.token_to_id(token)
    return (int(pad) if pad is not None else int(config.get("pad_id", 0))), token


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)
