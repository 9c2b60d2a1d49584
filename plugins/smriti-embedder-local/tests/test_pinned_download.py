"""The pinned default model: first-use download, checks, cache and fallback.

A loopback HTTP server stands in for the Hugging Face Hub (``HF_ENDPOINT``); it serves
the real int8 all-MiniLM-L6-v2 files, and ``SMRITI_MODEL_SPEC`` pins their checksums.
The ``hub`` fixture (conftest.FakeHub) can drop connections, corrupt or refuse files.
"""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import structlog
from smriti_embedder_local import LocalEmbedder, status
from smriti_embedder_local import plugin as local_plugin
from smriti_embedder_local.deferred import PinnedModelEmbedder
from smriti_embedder_local.pinned import ModelSpec, sha256_file

from smriti import ConfigError, ProviderError
from smriti.config import Settings
from smriti.engine.components import choose_embedder
from smriti.engine.core import EMBEDDING_MODEL_KEY, Engine
from smriti.plugins import Registry, create_plugin_manager

FALLBACK_EVENT = "semantic embedding model unavailable"


def _settings(tmp_path: Path, spec_file: Path, endpoint: str, **env: str) -> Settings:
    return Settings.from_env(
        {
            "ACCESSING_USER": "alice",
            "STORAGE_LOCATION": str(tmp_path / "store"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "HF_ENDPOINT": endpoint,
            "SMRITI_MODEL_SPEC": str(spec_file),
            **env,
        }
    )


def _spec(spec_file: Path) -> ModelSpec:
    return ModelSpec.from_dict(json.loads(spec_file.read_text()))


def _cache_dir(tmp_path: Path, spec_file: Path) -> Path:
    return _spec(spec_file).directory(tmp_path / "cache" / "smriti" / "models")


def _notices(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"].startswith(FALLBACK_EVENT)]


def _dead_endpoint() -> str:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _auto(settings: Settings):  # type: ignore[no-untyped-def]
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(local_plugin)
    return choose_embedder(Registry(pm), settings)


def _loaded(embedder: object) -> PinnedModelEmbedder:
    assert isinstance(embedder, PinnedModelEmbedder)
    assert embedder.wait(120), "the model did not finish loading"
    return embedder


def test_first_use_downloads_verifies_and_caches(tmp_path: Path, spec_file: Path, hub: Any):
    s = _settings(tmp_path, spec_file, hub.url)
    embedder = _loaded(LocalEmbedder.from_settings(s))
    assert embedder.loaded and embedder.failure is None
    vectors = embedder.embed(["A man is eating bread.", "Someone is having a meal."])
    assert vectors.shape == (2, 384) and float(vectors[0] @ vectors[1]) > 0.5
    where = _cache_dir(tmp_path, spec_file)
    for pinned in _spec(spec_file).files:
        assert sha256_file(where / pinned.path) == pinned.sha256
    assert not list(where.glob(".download*"))
    assert str(where).startswith(str(tmp_path / "cache" / "smriti" / "models"))
    info = status(s, verify=True)
    assert info["cached"] and info["revision"] == hub.revision and info["fallback_reason"] is None
    assert info["missing_bytes"] == 0 and info["path"] == str(where)


def test_partial_files_of_an_ended_process_are_removed(
    tmp_path: Path, spec_file: Path, hub: Any
) -> None:
    where = _cache_dir(tmp_path, spec_file)
    stale = where / ".download-999999999" / "onnx"  # above any pid_max: never alive
    stale.mkdir(parents=True)
    (stale / "model.onnx.incomplete").write_bytes(b"half a model")
    _loaded(LocalEmbedder.from_settings(_settings(tmp_path, spec_file, hub.url)))
    assert not list(where.glob(".download*"))


def test_cached_model_loads_without_the_network(tmp_path: Path, spec_file: Path, hub: Any):
    _loaded(LocalEmbedder.from_settings(_settings(tmp_path, spec_file, hub.url)))
    again = _loaded(LocalEmbedder.from_settings(_settings(tmp_path, spec_file, _dead_endpoint())))
    assert again.loaded


def test_startup_does_not_wait_for_the_model(tmp_path: Path, spec_file: Path, hub: Any):
    hub.delay = 0.3  # 8 requests: the download takes 2.4 s at least
    started = time.perf_counter()
    embedder = LocalEmbedder.from_settings(_settings(tmp_path, spec_file, hub.url))
    assert time.perf_counter() - started < 1.0
    assert isinstance(embedder, PinnedModelEmbedder) and not embedder.loaded
    assert embedder.model_id == _spec(spec_file).model_id and embedder.dims == 384
    _loaded(embedder)
    assert embedder.model_id == _spec(spec_file).model_id  # the id known early was right


def test_a_store_during_the_download_waits_for_the_model(
    tmp_path: Path, spec_file: Path, hub: Any
) -> None:
    import smriti_backend_kuzu.plugin as kuzu_plugin  # the product's default store

    hub.delay = 0.3
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(local_plugin)
    pm.register(kuzu_plugin)
    s = _settings(tmp_path, spec_file, hub.url, CONSOLIDATION_INTERVAL="0")
    with Engine(s, Registry(pm)) as engine:
        assert not engine.embedder.loaded
        engine.store("The user adopted a grey cat called Miso.")
        assert engine.embedder.loaded
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == _spec(spec_file).model_id
        found = engine.recall("what pet does the user have?", limit=1)
        assert "Miso" in found[0].engram.content


def test_embed_times_out_with_a_clear_error(tmp_path: Path, spec_file: Path, hub: Any):
    hub.delay = 0.3
    s = _settings(tmp_path, spec_file, hub.url, SMRITI_LOCAL_LOAD_TIMEOUT="0.1")
    embedder = LocalEmbedder.from_settings(s)
    with pytest.raises(ProviderError, match="still downloading.*SMRITI_LOCAL_LOAD_TIMEOUT"):
        embedder.embed(["hello"])
    _loaded(embedder)


def test_interrupted_download_resumes(tmp_path: Path, spec_file: Path, hub: Any):
    hub.drops["onnx/model.onnx"] = 1
    embedder = _loaded(LocalEmbedder.from_settings(_settings(tmp_path, spec_file, hub.url)))
    assert embedder.loaded, embedder.failure
    ranges = hub.gets("onnx/model.onnx")
    assert len(ranges) == 2 and ranges[0] is None
    assert ranges[1] is not None and re.fullmatch(r"bytes=[1-9]\d*-", ranges[1])
    where = _cache_dir(tmp_path, spec_file)
    assert sha256_file(where / "onnx/model.onnx") == _spec(spec_file).onnx_file.sha256


def test_failed_download_falls_back_then_a_later_start_succeeds(
    tmp_path: Path, spec_file: Path, hub: Any
) -> None:
    hub.fail.add("onnx/model.onnx")  # the server errs on this start
    with structlog.testing.capture_logs() as logs:
        first = _loaded(_auto(_settings(tmp_path, spec_file, hub.url)))
    assert not first.loaded and first.model_id.startswith("lexical")
    assert len(_notices(logs)) == 1
    assert not (_cache_dir(tmp_path, spec_file) / "onnx/model.onnx").exists()
    hub.fail.clear()
    second = _loaded(_auto(_settings(tmp_path, spec_file, hub.url)))
    assert second.loaded


def test_checksum_mismatch_is_refused_not_cached_and_falls_back(
    tmp_path: Path, spec_file: Path, hub: Any
) -> None:
    hub.corrupt.add("onnx/model.onnx")
    s = _settings(tmp_path, spec_file, hub.url)
    with structlog.testing.capture_logs() as logs:
        embedder = _loaded(_auto(s))
        vectors = embedder.embed(["hello world"])
    assert not embedder.loaded
    assert "failed its check" in (embedder.failure or "") and "sha256" in (embedder.failure or "")
    assert embedder.model_id.startswith("lexical") and vectors.shape[0] == 1
    notices = _notices(logs)
    assert len(notices) == 1 and notices[0]["log_level"] == "warning"
    assert "failed its check" in notices[0]["reason"]
    where = _cache_dir(tmp_path, spec_file)
    assert not (where / "onnx/model.onnx").exists() and not list(where.glob(".download*"))
    info = status(s)
    assert not info["cached"] and "failed its check" in info["fallback_reason"]


def test_explicit_local_with_a_bad_checksum_raises(tmp_path: Path, spec_file: Path, hub: Any):
    hub.corrupt.add("tokenizer.json")
    s = _settings(tmp_path, spec_file, hub.url, SMRITI_EMBEDDER="local")
    embedder = _loaded(_auto(s))
    with pytest.raises(ProviderError, match="not available.*failed its check"):
        embedder.embed(["hello"])


def test_corrupt_cache_is_detected_and_downloaded_again(
    tmp_path: Path, spec_file: Path, hub: Any
) -> None:
    s = _settings(tmp_path, spec_file, hub.url)
    _loaded(LocalEmbedder.from_settings(s))
    onnx = _cache_dir(tmp_path, spec_file) / "onnx/model.onnx"
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the checksum can tell
    onnx.write_bytes(bytes(data))
    before = len(hub.gets("onnx/model.onnx"))
    with structlog.testing.capture_logs() as logs:
        again = _loaded(LocalEmbedder.from_settings(s))
    assert again.loaded
    assert len(hub.gets("onnx/model.onnx")) == before + 1
    assert any(e["event"].startswith("cached model file is damaged") for e in logs)
    assert sha256_file(onnx) == _spec(spec_file).onnx_file.sha256


def test_no_server_falls_back_to_lexical_with_one_notice(tmp_path: Path, spec_file: Path):
    s = _settings(tmp_path, spec_file, _dead_endpoint())
    started = time.perf_counter()
    with structlog.testing.capture_logs() as logs:
        embedder = _loaded(_auto(s))
        assert time.perf_counter() - started < 5  # no retries with backoff
        vectors = embedder.embed(["hello", "world"])
        embedder.embed(["again"])
    assert embedder.name == "local" and not embedder.loaded
    assert embedder.model_id.startswith("lexical") and vectors.shape[0] == 2
    assert len(_notices(logs)) == 1
    assert "cannot reach" in embedder.failure  # type: ignore[operator]
    assert status(s)["last_error"] == embedder.failure


def test_offline_without_cache_falls_back_at_once(tmp_path: Path, spec_file: Path):
    s = _settings(tmp_path, spec_file, _dead_endpoint(), HF_HUB_OFFLINE="1")
    embedder = _loaded(_auto(s))
    assert embedder.model_id.startswith("lexical") and "HF_HUB_OFFLINE" in embedder.failure
    assert "HF_HUB_OFFLINE" in status(s)["fallback_reason"]


def test_explicit_local_offline_without_cache_is_a_config_error(tmp_path: Path, spec_file: Path):
    s = _settings(
        tmp_path, spec_file, _dead_endpoint(), HF_HUB_OFFLINE="1", SMRITI_EMBEDDER="local"
    )
    with pytest.raises(
        ConfigError, match="SMRITI_EMBEDDER=local needs a model.*SMRITI_LOCAL_MODEL"
    ):
        _auto(s)


def test_malformed_spec_file_is_a_config_error(tmp_path: Path, spec_file: Path):
    spec_file.write_text(json.dumps({"name": "x", "files": []}))
    with pytest.raises(ConfigError, match="SMRITI_MODEL_SPEC=.*not a model spec"):
        LocalEmbedder.from_settings(_settings(tmp_path, spec_file, _dead_endpoint()))


def test_cache_defaults_to_home_cache_without_xdg(tmp_path: Path):
    s = Settings.from_env({"HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert status(s)["path"].startswith(str(tmp_path / ".cache" / "smriti" / "models"))


def test_status_of_a_configured_directory(model_dir: Path, tmp_path: Path) -> None:
    info = status(Settings.from_env({"SMRITI_LOCAL_MODEL": str(model_dir)}))
    assert info["source"] == "directory" and info["cached"] and info["problems"] == {}
    bad = status(Settings.from_env({"SMRITI_LOCAL_MODEL": str(tmp_path)}))
    assert not bad["cached"] and set(bad["problems"]) == {"model.onnx", "tokenizer.json"}


def test_vectors_match_the_directory_route(
    tmp_path: Path, spec_file: Path, hub: Any, embedder: LocalEmbedder
) -> None:
    pinned = _loaded(LocalEmbedder.from_settings(_settings(tmp_path, spec_file, hub.url)))
    texts = ["The central bank raised interest rates again.", "I have two cats."]
    assert np.allclose(pinned.embed(texts), embedder.embed(texts), atol=1e-6)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_initialize_answers_while_the_model_downloads(
    tmp_path: Path, spec_file: Path, hub: Any
) -> None:
    """The real server over stdio: initialize at once, a store waits for the model."""
    import os
    import sys

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    hub.delay = 2.5  # 8 requests: the model cannot be there before 20 s
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "EMBEDDING_"))}
    env.update(
        STORAGE_LOCATION=str(tmp_path / "store"),
        ACCESSING_USER="stdio-user",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        HF_ENDPOINT=hub.url,
        SMRITI_MODEL_SPEC=str(spec_file),
        BACKUP_TYPE="none",
        LOG_LEVEL="info",
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "smriti"], env=env)
    started = time.perf_counter()
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            assert client.server_info.name == "smriti"
            assert time.perf_counter() - started < 20
            stored = await client.call_tool("smriti_store", {"content": "Miso is a grey cat"})
            assert not stored.is_error, stored
            assert time.perf_counter() - started >= 20  # it waited for the model
    # The model is loaded by the store's owner process, which logs to its own file.
    log = (tmp_path / "stderr.log").read_text()
    owner_log = (tmp_path / "store" / "stdio-user" / "owner.log").read_text()
    assert "local embedding model loaded" in owner_log
    assert FALLBACK_EVENT not in log and FALLBACK_EVENT not in owner_log
    assert "embedding model download" in owner_log  # progress lines in its log
