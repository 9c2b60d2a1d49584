"""The default model (bge-small-en-v1.5 int8) as pinned, and stores of an earlier one.

The loopback Hub (conftest.FakeHub) serves the default model's real bytes, from
LangChain4j's jar on Maven Central, at the pinned repository and revision; no
``SMRITI_MODEL_SPEC`` is set, so the product's own pins are what is checked.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import smriti_backend_kuzu.plugin as kuzu_plugin
from smriti_embedder_local import LocalEmbedder, pinned
from smriti_embedder_local import plugin as local_plugin
from smriti_embedder_local.deferred import PinnedModelEmbedder
from smriti_embedder_local.model_files import from_directory
from smriti_embedder_local.pinned import DEFAULT_SPEC, MINILM_SPEC, ModelSpec
from structlog.testing import capture_logs

from smriti.config import Settings
from smriti.engine.core import EMBEDDING_MODEL_KEY, Engine
from smriti.engine.reembed import reembed
from smriti.plugins import Registry, create_plugin_manager

from .conftest import FakeHub


def _settings(tmp_path: Path, endpoint: str, **env: str) -> Settings:
    return Settings.from_env(
        {
            "ACCESSING_USER": "alice",
            "STORAGE_LOCATION": str(tmp_path / "store"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "HF_ENDPOINT": endpoint,
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
            **env,
        }
    )


@pytest.fixture
def default_hub(default_hub_files: dict[str, bytes]):  # type: ignore[no-untyped-def]
    server = FakeHub(default_hub_files, repo=DEFAULT_SPEC.repo, revision=DEFAULT_SPEC.revision)
    yield server
    server.close()


def test_the_default_spec_pins_the_published_bytes(default_hub_files: dict[str, bytes]) -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", DEFAULT_SPEC.revision)
    assert {f.path for f in DEFAULT_SPEC.files} == set(default_hub_files)
    for pin in DEFAULT_SPEC.files:
        data = default_hub_files[pin.path]
        assert hashlib.sha256(data).hexdigest() == pin.sha256
        assert len(data) == pin.size
    assert DEFAULT_SPEC.model_id == "local:bge-small-en-v1.5:6c9c6101a956:384"
    assert DEFAULT_SPEC.pooling == "cls"


def test_the_default_model_downloads_at_its_pin_and_declares_its_baseline(
    tmp_path: Path, default_hub: Any, default_model_dir: Path
) -> None:
    embedder = LocalEmbedder.from_settings(_settings(tmp_path, default_hub.url))
    assert isinstance(embedder, PinnedModelEmbedder)
    assert embedder.similarity_baseline == 0.48  # known before the model is
    assert embedder.wait(120) and embedder.loaded, embedder.failure
    assert embedder.model_id == DEFAULT_SPEC.model_id
    assert embedder.similarity_baseline == 0.48
    direct = LocalEmbedder(from_directory(default_model_dir))  # CLS pooling, 512 tokens
    texts = ["The central bank raised interest rates again.", "I have two cats."]
    assert np.allclose(embedder.embed(texts), direct.embed(texts), atol=1e-6)
    assert direct.similarity_baseline == 0.48  # the same weights, found by checksum
    cat, nap, tax = embedder.embed(["my cat sleeps a lot", "the cat naps all day", "tax law"])
    assert float(cat @ nap) > float(cat @ tax)
    embedder.close()


def test_a_spec_may_state_its_own_baseline(spec_file: Path) -> None:
    data = json.loads(spec_file.read_text())
    assert ModelSpec.from_dict({**data, "similarity_baseline": 0.3}).similarity_baseline == 0.3
    with pytest.raises(Exception, match="similarity_baseline"):
        ModelSpec.from_dict({**data, "similarity_baseline": 1.5})


def test_a_store_of_an_earlier_default_model_keeps_it_until_reembedded(
    tmp_path: Path,
    spec_file: Path,
    hub: Any,
    default_hub_files: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub.add(DEFAULT_SPEC.repo, DEFAULT_SPEC.revision, default_hub_files)
    earlier = ModelSpec.from_dict(json.loads(spec_file.read_text()))
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(local_plugin)
    pm.register(kuzu_plugin)
    made = _settings(tmp_path, hub.url, SMRITI_MODEL_SPEC=str(spec_file))
    with Engine(made, Registry(pm)) as engine:
        engine.store("The user adopted a grey cat called Miso.")
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == earlier.model_id

    # A release later: the default model changed, the earlier one is a previous default.
    monkeypatch.setattr(pinned, "PREVIOUS_SPECS", (earlier, MINILM_SPEC))
    with Engine(_settings(tmp_path, hub.url), Registry(pm)) as engine, capture_logs() as logs:
        found = engine.recall("what pet does the user have?", limit=1)
        assert "Miso" in found[0].engram.content
        assert engine.embedder.model_id == earlier.model_id
        assert engine.configured_embedder.model_id == DEFAULT_SPEC.model_id
        assert any("earlier model" in e["event"] for e in logs)
        engine.store("The user's cat Miso is three years old.")
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == earlier.model_id

        report = reembed(engine)
        assert report.new_model == DEFAULT_SPEC.model_id
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == DEFAULT_SPEC.model_id
        assert engine.scale.baseline == 0.48
        found = engine.recall("how old is the cat?", limit=1)
        assert "three years" in found[0].engram.content


def test_a_store_of_an_unknown_local_model_is_still_refused(
    tmp_path: Path, spec_file: Path, hub: Any, default_hub_files: dict[str, bytes]
) -> None:
    hub.add(DEFAULT_SPEC.repo, DEFAULT_SPEC.revision, default_hub_files)
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(local_plugin)
    pm.register(kuzu_plugin)
    with Engine(_settings(tmp_path, hub.url, SMRITI_MODEL_SPEC=str(spec_file)), Registry(pm)) as e:
        e.store("The user adopted a grey cat called Miso.")
    with (
        Engine(_settings(tmp_path, hub.url, SMRITI_EMBEDDER="local"), Registry(pm)) as engine,
        pytest.raises(Exception, match="smriti reembed"),
    ):
        engine.recall("what pet does the user have?", limit=1)
