"""A small OpenAI-compatible HTTP server for tests (no network, no API key).

``/v1/embeddings`` returns deterministic bag-of-words vectors (texts that share words
get similar vectors), ``/v1/chat/completions`` returns extraction JSON derived from the
last user message, and the server can be told to fail, stall or answer garbage::

    from smriti.testing.fake_openai import FakeOpenAI

    with FakeOpenAI(dims=32) as server:
        env = server.env()              # LLM_BASE_URL, LLM_API_KEY, EMBEDDING_DIMS unset
        server.fail_next(2, status=429, retry_after=0.1)
        ...
        assert server.requests[-1].headers["authorization"] == "Bearer sk-test"

In a pytest suite, add ``pytest_plugins = ["smriti.testing.fake_openai"]`` to the root
``conftest.py`` and take the ``fake_openai`` fixture (a started server, stopped after
the test).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
_STOPWORD_TEXT = """a an and are as at be but by for from has have i in is it its me my of on
    or our she he so that the their them they this to was we were what when where which
    who will with you your"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_SENTENCE_STARTERS = _STOPWORDS | {
    "yesterday",
    "today",
    "tomorrow",
    "then",
    "also",
    "however",
    "after",
    "before",
    "please",
    "remember",
    "note",
    "last",
    "next",
    "every",
    "always",
    "never",
    "how",
}


@dataclass(slots=True)
class RecordedRequest:
    """One request the fake server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    time: float = field(default_factory=time.monotonic)


def token_vector(token: str, dims: int) -> np.ndarray:
    """A fixed pseudo-random unit vector per token (stable across processes)."""
    seed = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(dims)
    return vector / np.linalg.norm(vector)


def fake_embedding(text: str, dims: int) -> list[float]:
    """The fake server's vector for ``text``: normalised sum of its word vectors.

    Texts with no words get a vector seeded by the whole text.
    """
    tokens = [t.lower() for t in _WORD.findall(text)]
    words = [t for t in tokens if t not in _STOPWORDS] or tokens or [f"\x00{text}"]
    total = np.sum([token_vector(w, dims) for w in words], axis=0)
    norm = np.linalg.norm(total)
    return (total / norm if norm > 0 else total).astype(np.float32).tolist()


def fake_extraction(text: str) -> dict[str, Any]:
    """Deterministic extraction JSON: capitalised and long words become cues."""
    words = _WORD.findall(text)
    # A capital at the start of a sentence says little ("Yesterday I met ...").
    initial = {m.end() for m in re.finditer(r"(?:^|[.!?:])\s*", text)}
    named = {
        m.group()
        for m in _WORD.finditer(text)
        if m.start() not in initial or m.group().lower() not in _SENTENCE_STARTERS
    }
    cues: list[dict[str, str]] = []
    seen: set[str] = set()

    def add(word: str, cue_type: str) -> None:
        key = word.lower()
        if key not in seen and key not in _STOPWORDS and len(cues) < 10:
            seen.add(key)
            cues.append({"name": word, "type": cue_type})

    for word in words:
        if word[0].isupper() and len(word) > 1 and word in named:
            add(word, "entity")
        elif len(word) >= 7:
            add(word, "keyword")
    for word in sorted(words, key=len, reverse=True):
        if len(cues) >= 3:
            break
        add(word, "keyword")
    lowered = text.lower()
    if re.search(r"\bhow to\b|\bstep\b|\binstall\b|\brun\b", lowered):
        memory_type = "procedural"
    elif re.search(r"\byesterday\b|\btoday\b|\blast\b|\bwent\b|\bmet\b", lowered):
        memory_type = "episodic"
    else:
        memory_type = "semantic"
    first = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    return {"summary": first[:200], "memory_type": memory_type, "cues": cues}


class FakeOpenAI:
    """A threaded OpenAI-compatible server on 127.0.0.1 and a free port.

    Use as a context manager (or ``start()``/``stop()``). Knobs, all thread-safe:

    - ``fail_next(n, status, retry_after)``: the next n requests answer an error status.
    - ``malformed_next(n, kind)``: the next n requests answer garbage (``"text"`` prose,
      ``"broken"`` truncated JSON in the chat content, ``"http"`` a broken HTTP body).
    - ``delay``: seconds to wait before answering each request.
    - ``reject_json_schema`` / ``reject_json_object``: 400 for that ``response_format``.
    - ``reject_temperature``: 400 when ``temperature`` is sent (as some reasoning models do).
    - ``chat_reply``: a function from the user message to the reply content (str) or
      object (dumped as JSON), replacing ``fake_extraction``.
    - ``honour_dimensions``: whether the ``dimensions`` parameter is obeyed.
    - ``requests``: every request received (method, path, lower-cased headers, body).
    """

    def __init__(self, dims: int = 32, *, api_key: str = "sk-fake-test-key") -> None:
        self.dims = dims
        self.api_key = api_key
        self.delay = 0.0
        self.reject_json_schema = False
        self.reject_json_object = False
        self.reject_temperature = False
        self.honour_dimensions = True
        self.chat_reply: Callable[[str], Any] | None = None
        self.requests: list[RecordedRequest] = []
        self._failures: list[tuple[int, float | None, str | None]] = []
        self._malformed: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Start serving in a background thread; returns self."""
        handler = type("Handler", (_Handler,), {"fake": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port (requests still sleeping are abandoned)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ending in ``/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for ``Settings.from_env``: LLM and embeddings pointed here."""
        return {
            "LLM_BASE_URL": self.base_url,
            "LLM_API_KEY": self.api_key,
            "LLM_MODEL": "fake-chat",
            "EMBEDDING_MODEL": "fake-embed",
            "LLM_TIMEOUT": "5",
            **extra,
        }

    # --- knobs -------------------------------------------------------------------

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        retry_after: float | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next ``n`` requests with ``status`` (and ``Retry-After`` if given).

        ``message`` replaces the error message in the body (e.g. to check redaction).
        """
        with self._lock:
            self._failures.extend([(status, retry_after, message)] * n)

    def malformed_next(self, n: int = 1, kind: str = "text") -> None:
        """Answer the next ``n`` requests with garbage of the given ``kind``."""
        if kind not in {"text", "broken", "http"}:
            raise ValueError("kind must be 'text', 'broken' or 'http'")
        with self._lock:
            self._malformed.extend([kind] * n)

    def reset(self) -> None:
        """Forget recorded requests and pending failures; restore default knobs."""
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self._malformed.clear()
        self.delay = 0.0
        self.reject_json_schema = self.reject_json_object = self.reject_temperature = False
        self.honour_dimensions = True
        self.chat_reply = None

    def requests_to(self, suffix: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with ``suffix`` (e.g. ``"/embeddings"``)."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(suffix)]

    # --- request handling (called from server threads) --------------------------

    def _record(
        self, request: RecordedRequest
    ) -> tuple[tuple[int, float | None, str | None] | None, str]:
        with self._lock:
            self.requests.append(request)
            failure = self._failures.pop(0) if self._failures else None
            malformed = self._malformed.pop(0) if self._malformed and not failure else ""
        return failure, malformed

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, Any]:
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return 400, _error("'input' must be a string or a list of strings", "input")
        if any(not t for t in texts):
            return 400, _error("'input' must not contain empty strings", "input")
        dims = self.dims
        if self.honour_dimensions and isinstance(body.get("dimensions"), int):
            dims = body["dimensions"]
        data = []
        for i, text in enumerate(texts):
            vector: Any = fake_embedding(text, dims)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage}

    def _chat(self, body: dict[str, Any], malformed: str) -> tuple[int, Any]:
        fmt = (body.get("response_format") or {}).get("type")
        if self.reject_temperature and "temperature" in body:
            return 400, _error("Unsupported parameter: 'temperature' for this model", "temperature")
        if fmt == "json_schema" and self.reject_json_schema:
            return 400, _error("response_format of type 'json_schema' is not supported", "fmt")
        if fmt == "json_object" and self.reject_json_object:
            return 400, _error("response_format of type 'json_object' is not supported", "fmt")
        user = next(
            (
                m.get("content")
                for m in reversed(body.get("messages") or [])
                if m.get("role") == "user"
            ),
            "",
        )
        user = user if isinstance(user, str) else json.dumps(user)
        if malformed == "text":
            content = "I am sorry, I cannot help with that request."
        elif malformed == "broken":
            content = '{"summary": "cut off", "memory_type": "semantic", "cues": [{"name": "x'
        else:
            reply = self.chat_reply(user) if self.chat_reply else fake_extraction(user)
            content = reply if isinstance(reply, str) else json.dumps(reply)
            if fmt is None and not self.chat_reply:
                content = f"Here is the extraction:\n```json\n{content}\n```"
        return 200, _completion(body.get("model"), content)


def _error(message: str, param: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    }


def _completion(model: Any, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or "fake-chat",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence the default per-request stderr line."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self.fake._record(self._recorded(None))
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._send(404, _error(f"no route {self.path}", "path"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        failure, malformed = self.fake._record(self._recorded(body))
        if self.fake.delay:
            time.sleep(self.fake.delay)
        if failure is not None:
            status, retry_after, message = failure
            headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
            self._send(status, _error(message or f"injected failure {status}", "none"), headers)
        elif malformed == "http":
            self._send_raw(200, b'{"object": "list", "data": [', "application/json")
        elif not isinstance(body, dict):
            self._send(400, _error("request body is not a JSON object", "body"))
        elif self.path.rstrip("/").endswith("/embeddings"):
            self._send(*self.fake._embeddings(body))
        elif self.path.rstrip("/").endswith("/chat/completions"):
            self._send(*self.fake._chat(body, malformed))
        else:
            self._send(404, _error(f"no route {self.path}", "path"))

    def _recorded(self, body: Any) -> RecordedRequest:
        headers = {k.lower(): v for k, v in self.headers.items()}
        return RecordedRequest(self.command, self.path, headers, body)

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(
        self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout); nothing to answer


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started FakeOpenAI server (32 dims), stopped after the test."""
    with FakeOpenAI() as server:
        yield server
