"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint.

Works with OpenAI and with local servers (Ollama, vLLM, llama.cpp, LM Studio): set
``EMBEDDING_BASE_URL`` and no key is needed. ``EMBEDDING_API_KEY`` falls back to
``LLM_API_KEY``, and ``EMBEDDING_BASE_URL`` to ``LLM_BASE_URL``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from smriti import ConfigError, Embedder, ProviderError, get_logger
from smriti.default_plugins._openai_common import (
    PLACEHOLDER_KEY,
    LazyClient,
    MalformedResponse,
    RetryPolicy,
    call_with_retries,
    safe_url,
)

if TYPE_CHECKING:
    from openai import OpenAI

    from smriti import Settings

log = get_logger(__name__)


def supports_dimensions(model: str) -> bool:
    """Whether the model accepts the ``dimensions`` request parameter (text-embedding-3*)."""
    return "text-embedding-3" in model


class OpenAIEmbedder(Embedder):
    """Embedder backed by an OpenAI-compatible embeddings API.

    ``dims`` is ``EMBEDDING_DIMS`` when set (sent as ``dimensions`` to models that
    support it, and checked on every response), otherwise learned from the first
    vector and checked from then on. Rows are float32 and L2-normalised.
    """

    name: ClassVar[str] = "openai"
    priority: ClassVar[int] = 100
    description: ClassVar[str] = "OpenAI-compatible embeddings API (OpenAI, Ollama, vLLM, ...)"
    #: Texts per request; OpenAI accepts up to 2048, smaller batches keep requests small.
    batch_size: ClassVar[int] = 256

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        dims: int | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.policy = RetryPolicy(max_retries=max_retries)
        self._api_key = api_key
        self._requested_dims = dims
        self._dims = dims
        self._client = LazyClient(self.base_url, api_key, timeout)
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> OpenAIEmbedder | None:
        """An instance when an API key or ``EMBEDDING_BASE_URL`` is set, else None.

        With ``explicit`` and nothing configured, raise ConfigError naming the variables.
        """
        key = settings.effective_embedding_api_key
        if not key and not settings.embedding_base_url:
            if explicit:
                raise ConfigError(
                    "SMRITI_EMBEDDER=openai needs EMBEDDING_API_KEY (or LLM_API_KEY), "
                    "or EMBEDDING_BASE_URL for a local server that needs no key"
                )
            return None
        return cls(
            base_url=settings.effective_embedding_base_url,
            api_key=key or PLACEHOLDER_KEY,
            model=settings.embedding_model,
            dims=settings.embedding_dims,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={safe_url(self.base_url)!r}, model={self.model!r})"

    @property
    def model_id(self) -> str:
        """``openai:<base url>:<model>:<dims>``; dims reads ``?`` until the first vector."""
        dims = self._dims if self._dims is not None else "?"
        return f"openai:{safe_url(self.base_url)}:{self.model}:{dims}"

    @property
    def dims(self) -> int | None:
        """``EMBEDDING_DIMS``, or the length of the first vector seen, or None."""
        return self._dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (one request per ``batch_size``): (n, dims) float32 unit rows.

        Raises ProviderError after the retries, or when the vector length is not the
        configured or previously seen one.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if not texts:
            return np.zeros((0, self._dims or 0), dtype=np.float32)
        blocks = [
            self._embed_batch(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        return np.vstack(blocks)

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def _get_client(self) -> OpenAI:
        return self._client.get()

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        # Most endpoints reject empty strings; a blank embeds like "nothing in particular".
        inputs = [t if t.strip() else " " for t in texts]
        params: dict[str, Any] = {"model": self.model, "input": inputs, "encoding_format": "float"}
        if self._requested_dims is not None and supports_dimensions(self.model):
            params["dimensions"] = self._requested_dims
        client = self._get_client()

        def request() -> np.ndarray:
            response = client.embeddings.create(**params)
            return _to_matrix(response, len(inputs))

        matrix = call_with_retries(
            request, self.policy, what=f"embedding with {self.model}", secrets=[self._api_key]
        )
        self._check_dims(matrix.shape[1])
        return _normalise(matrix)

    def _check_dims(self, got: int) -> None:
        with self._lock:
            if self._dims is None:
                self._dims = got
                log.info("embedding dimension learned", model=self.model, dims=got)
                return
            expected = self._dims
        if got != expected:
            source = "EMBEDDING_DIMS" if self._requested_dims is not None else "earlier vectors"
            raise ProviderError(
                f"embedding model {self.model!r} returned {got}-dimensional vectors but "
                f"{source} say {expected}; set EMBEDDING_DIMS={got} or use a model "
                f"that produces {expected} dimensions"
            )


def _to_matrix(response: Any, expected: int) -> np.ndarray:
    """The response's vectors in input order as a float32 matrix, or MalformedResponse."""
    data = getattr(response, "data", None)
    if not isinstance(data, list) or len(data) != expected:
        got = len(data) if isinstance(data, list) else type(data).__name__
        raise MalformedResponse(f"expected {expected} embeddings, got {got}")
    items = sorted(data, key=lambda d: getattr(d, "index", 0) or 0)
    try:
        matrix = np.asarray([item.embedding for item in items], dtype=np.float32)
    except (TypeError, ValueError, AttributeError) as exc:
        raise MalformedResponse(f"embeddings are not equal-length number lists ({exc})") from None
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise MalformedResponse(f"embeddings have shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise MalformedResponse("embeddings contain NaN or infinity")
    return matrix


def _normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (all-zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)
