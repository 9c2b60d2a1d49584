"""Shared plumbing of the OpenAI-compatible embedder and cue extractor.

The ``openai`` client is created with ``max_retries=0`` and every call goes through
``call_with_retries``: bounded attempts, exponential backoff with jitter, ``Retry-After``
honoured up to a cap, and errors turned into ``ProviderError`` with secrets redacted.
``openai`` itself is imported lazily so that loading the plugin stays cheap.
"""

from __future__ import annotations

import email.utils
import math
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from smriti import ProviderError, get_logger

if TYPE_CHECKING:
    from openai import OpenAI

log = get_logger(__name__)

DEFAULT_LLM_BASE_URL = "https://api.openai.com/v1"
#: The key sent to servers that need none (Ollama, vLLM, llama.cpp); the client insists on one.
PLACEHOLDER_KEY = "not-needed"
RETRYABLE_STATUS = frozenset({408, 409, 429})


class MalformedResponse(ValueError):
    """The provider answered, but not with something we can use (worth a retry)."""


@dataclass(slots=True)
class RetryPolicy:
    """How often and how long to retry a failing provider call.

    ``max_retries`` comes from ``LLM_MAX_RETRIES``; the delays are attributes so that
    tests can shrink them. Attempt ``n`` (0-based) waits ``min(cap, base * 2**n)``
    scaled by a random factor in [0.5, 1], or the server's ``Retry-After`` (capped).
    """

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    retry_after_cap: float = 20.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1``."""
        if retry_after is not None and math.isfinite(retry_after) and retry_after > 0:
            return min(retry_after, self.retry_after_cap)
        backoff = min(self.backoff_cap, self.backoff_base * (2**attempt))
        return backoff * random.uniform(0.5, 1.0)


@dataclass(slots=True, frozen=True)
class Failure:
    """A classified provider exception."""

    retryable: bool
    reason: str
    status: int | None = None
    retry_after: float | None = None


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment, and without a trailing slash."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every non-trivial secret replaced by ``***``."""
    for secret in secrets:
        if secret and secret != PLACEHOLDER_KEY and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def make_client(base_url: str, api_key: str, timeout: float) -> OpenAI:
    """A synchronous ``openai.OpenAI`` client that never retries on its own."""
    from openai import OpenAI

    return OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


class LazyClient:
    """One ``openai.OpenAI`` client, made on first use, closed once; thread-safe."""

    def __init__(self, base_url: str, api_key: str, timeout: float) -> None:
        self._args = (base_url, api_key, timeout)
        self._client: OpenAI | None = None
        self._lock = threading.Lock()

    def get(self) -> OpenAI:
        """The client (created now if needed)."""
        with self._lock:
            if self._client is None:
                self._client = make_client(*self._args)
            return self._client

    def close(self) -> None:
        """Close the HTTP client; a later ``get`` makes a new one."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``Retry-After-Ms`` / ``Retry-After`` (seconds or HTTP date), or None."""
    if headers is None:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            continue
        return max(0.0, when.timestamp() - time.time())
    return None


def classify(exc: BaseException) -> Failure:
    """Decide whether ``exc`` (raised by the openai client or our parsing) is retryable."""
    import openai

    if isinstance(exc, MalformedResponse):
        return Failure(True, f"malformed response: {exc}")
    if isinstance(exc, openai.APITimeoutError):
        return Failure(True, "request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return Failure(True, f"connection error: {exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in RETRYABLE_STATUS or status >= 500
        after = parse_retry_after(exc.response.headers) if retryable else None
        return Failure(retryable, f"HTTP {status}: {exc.message}", status, after)
    if isinstance(exc, openai.APIResponseValidationError | ValueError):
        return Failure(True, f"malformed response: {exc}")
    return Failure(False, f"{type(exc).__name__}: {exc}")


def call_with_retries[T](
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    secrets: Iterable[str] = (),
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` up to ``policy.max_retries + 1`` times; ProviderError on final failure.

    Non-retryable errors (authentication, bad request, not found) fail at once.
    """
    secrets = tuple(secrets)
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            failure = classify(exc)
            reason = redact(failure.reason, secrets)
            if not failure.retryable or attempt >= policy.max_retries:
                tries = attempt + 1
                raise ProviderError(
                    f"{what} failed after {tries} attempt{'s' * (tries > 1)}: {reason}"
                ) from None
            wait = policy.delay(attempt, failure.retry_after)
            log.warning(
                "provider call failed, retrying",
                what=what,
                attempt=attempt + 1,
                reason=reason[:300],
                wait_s=round(wait, 3),
            )
            sleep(wait)
            attempt += 1
