"""Moving a store made with the lexical embedder to the local model (``smriti reembed``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import smriti_backend_kuzu.plugin as kuzu_plugin  # the product's default store
from smriti_embedder_local import LocalEmbedder
from smriti_embedder_local import plugin as local_plugin

from smriti import ConfigError
from smriti.config import Settings
from smriti.engine.core import EMBEDDING_MODEL_KEY, Engine
from smriti.engine.reembed import IN_PROGRESS, reembed
from smriti.plugins import Registry, create_plugin_manager

MEMORIES = [
    "The user adopted a grey cat called Miso last spring.",
    "The user works as a nurse at the children's hospital.",
    "The user is learning to play the cello on weekends.",
    "The user's sister lives in Lisbon and teaches chemistry.",
    "The user prefers green tea to coffee in the morning.",
]


def _engine(tmp_path: Path, **env: str) -> Engine:
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(kuzu_plugin)
    pm.register(local_plugin)
    settings = Settings.from_env(
        {
            "ACCESSING_USER": "alice",
            "STORAGE_LOCATION": str(tmp_path / "store"),
            "CONSOLIDATION_INTERVAL": "0",
            "BACKUP_SYNC_INTERVAL": "0",
            **env,
        }
    )
    return Engine(settings, Registry(pm)).open()


@pytest.fixture
def lexical_store(tmp_path: Path) -> Path:
    """A store whose memories were embedded by the lexical embedder."""
    with _engine(tmp_path, SMRITI_EMBEDDER="lexical") as engine:
        for text in MEMORIES:
            engine.store(text)
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY).startswith("lexical")
    return tmp_path


def test_reembed_moves_a_lexical_store_to_the_local_model(
    lexical_store: Path, model_dir: Path, embedder: LocalEmbedder
) -> None:
    with _engine(lexical_store, SMRITI_LOCAL_MODEL=str(model_dir)) as engine:
        # auto keeps the store's own (lexical) embedder until the store is moved
        assert engine.recall("Miso the grey cat", limit=1)[0].engram.content == MEMORIES[0]
        assert engine.embedder.model_id == "lexical:v1:384"
        before = engine.backend.counts()
        report = reembed(engine, batch_size=2)
        assert (report.engrams, report.old_model, report.new_model) == (
            5,
            "lexical:v1:384",
            embedder.model_id,
        )
        assert report.cues == before["cues"] and not report.skipped
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == embedder.model_id
        assert engine.backend.counts() == before  # every edge kept
        for e in engine.backend.iter_engrams():
            assert np.allclose(e.embedding, embedder.embed([e.content])[0], atol=1e-5)
        for c in engine.backend.iter_cues():
            assert np.allclose(c.embedding, embedder.embed([c.name])[0], atol=1e-5)
        found = engine.recall("does the user have any animals at home?", limit=1, mode="search")
        assert "Miso" in found[0].engram.content  # the new vectors answer vector search
        engine.store("The user ran a half marathon in October.")
        assert reembed(engine).skipped


def test_a_named_embedder_refuses_a_store_of_another_model(
    lexical_store: Path, model_dir: Path
) -> None:
    env = {"SMRITI_EMBEDDER": "local", "SMRITI_LOCAL_MODEL": str(model_dir)}
    with _engine(lexical_store, **env) as engine:
        with pytest.raises(ConfigError, match="embedded with 'lexical.*smriti reembed"):
            engine.recall("what pet does the user have?")
        assert reembed(engine).engrams == 5
        assert engine.recall("Miso the grey cat", limit=1)[0].engram.content == MEMORIES[0]


def test_interrupted_reembed_leaves_the_store_refused_until_rerun(
    lexical_store: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _engine(lexical_store, SMRITI_LOCAL_MODEL=str(model_dir)) as engine:
        real = engine.embedder.embed
        calls = {"n": 0}

        def flaky(texts: Any) -> np.ndarray:
            calls["n"] += 1
            if calls["n"] == 3:  # the probe, one batch, then the crash
                raise KeyboardInterrupt
            return real(texts)

        monkeypatch.setattr(engine.embedder, "embed", flaky)
        with pytest.raises(KeyboardInterrupt):
            reembed(engine, batch_size=2)
        model = engine.embedder.model_id
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == IN_PROGRESS + model
    with _engine(lexical_store, SMRITI_EMBEDDER="lexical") as engine, pytest.raises(ConfigError):
        engine.store("half re-embedded stores take no new memories")
    with _engine(lexical_store, SMRITI_LOCAL_MODEL=str(model_dir)) as engine:
        assert reembed(engine).engrams == 5
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == model


def test_reembed_refuses_a_model_that_fell_back(lexical_store: Path, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    with _engine(lexical_store, **env) as engine:
        with pytest.raises(ConfigError, match="not available.*nothing was re-embedded"):
            reembed(engine)
        assert engine.backend.get_meta(EMBEDDING_MODEL_KEY) == "lexical:v1:384"


def _cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLM_", "EMBEDDING_", "SMRITI_", "HF_"))
    }
    return {
        **keep,
        "STORAGE_LOCATION": str(tmp_path / "store"),
        "ACCESSING_USER": "alice",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "BACKUP_TYPE": "none",
        **extra,
    }


def _smriti(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "smriti", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_cli_offline_first_start_then_reembed(tmp_path: Path, model_dir: Path) -> None:
    offline = _cli_env(tmp_path, HF_HUB_OFFLINE="1")
    stored = _smriti(offline, "store", "The user adopted a grey cat called Miso.", "--json")
    assert stored.returncode == 0, stored.stderr
    assert json.loads(stored.stdout)["id"]
    assert stored.stderr.count("semantic embedding model unavailable") == 1  # one notice
    assert "HF_HUB_OFFLINE" in stored.stderr
    local = _cli_env(tmp_path, SMRITI_LOCAL_MODEL=str(model_dir))
    moved = _smriti(local, "reembed", "--json")
    assert moved.returncode == 0, moved.stderr
    report = json.loads(moved.stdout)
    assert report["engrams"] == 1 and report["old_model"] == "lexical:v1:384"
    assert report["new_model"].startswith("local:")
    again = _smriti(local, "reembed")
    assert again.returncode == 0 and "nothing to do" in again.stdout
