"""The local ONNX embedder against the real all-MiniLM-L6-v2 (int8) model."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from smriti_embedder_local import LocalEmbedder
from smriti_embedder_local import plugin as local_plugin

from smriti import ConfigError
from smriti.config import Settings
from smriti.engine.components import choose_embedder
from smriti.plugins import Registry, create_plugin_manager

SENTENCES = [
    "A man is eating a piece of bread.",
    "Someone is having a meal.",
    "The central bank raised interest rates again.",
    "",
]


def settings(**env: str) -> Settings:
    return Settings.from_env({"ACCESSING_USER": "alice", **env})


def test_shape_dtype_and_unit_norm(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed(SENTENCES)
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.dims == 384


def test_empty_batch(embedder: LocalEmbedder) -> None:
    assert embedder.embed([]).shape == (0, 384)


def test_single_string_is_rejected(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("not a list")  # type: ignore[arg-type]


def test_paraphrases_are_closer_than_unrelated(embedder: LocalEmbedder) -> None:
    a, b, c, _ = embedder.embed(SENTENCES)
    assert float(a @ b) > 0.5
    assert float(a @ b) > float(a @ c) + 0.3
    q, good, bad = embedder.embed(
        ["What pets does the user have?", "I have two cats and a dog.", "I drive a red car."]
    )
    assert float(q @ good) > float(q @ bad)


def test_deterministic_and_batch_independent(embedder: LocalEmbedder) -> None:
    batch = embedder.embed(SENTENCES)
    again = embedder.embed(SENTENCES)
    assert np.array_equal(batch, again)
    singles = np.vstack([embedder.embed([s]) for s in SENTENCES])
    assert np.allclose(batch, singles, atol=1e-4)


def test_short_texts_are_not_padded_to_a_long_one(embedder: LocalEmbedder) -> None:
    question = "what did Melanie paint after the camping trip with her two kids last summer?"
    texts = [question, "melanie", "camping trip", "kids", "paint"]

    def batches(texts: list[str]) -> list[list[int]]:
        return embedder._batches([sum(e.attention_mask) for e in embedder._encode(texts)])

    assert batches(texts) == [[1, 3, 4, 2], [0]]  # shortest first, the question alone
    many = ["the same short text"] * 40
    sizes = [len(b) for b in batches(many)]
    assert sizes == [16, 16, 8]
    assert sorted(i for b in batches(many) for i in b) == list(range(40))


def test_thread_safe(embedder: LocalEmbedder) -> None:
    expected = embedder.embed(SENTENCES)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: embedder.embed(SENTENCES), range(8)))
    for got in results:
        assert np.allclose(got, expected, atol=1e-4)


def test_long_text_is_truncated(embedder: LocalEmbedder) -> None:
    vector = embedder.embed(["word " * 5000])
    assert vector.shape == (1, 384)


def test_model_id_names_model_hash_and_dims(embedder: LocalEmbedder) -> None:
    name, digest, dims = embedder.model_id.split(":")[1:]
    assert embedder.model_id.startswith("local:")
    assert name and len(digest) == 12 and dims == "384"


def test_missing_directory_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError, match="SMRITI_LOCAL_MODEL=.*not a directory"):
        LocalEmbedder.from_settings(settings(SMRITI_LOCAL_MODEL=str(missing)), explicit=True)


def test_directory_without_tokenizer_is_a_config_error(tmp_path: Path, model_dir: Path) -> None:
    shutil.copy(model_dir / "model.onnx", tmp_path / "model.onnx")
    with pytest.raises(ConfigError, match="tokenizer.json"):
        LocalEmbedder.from_settings(settings(SMRITI_LOCAL_MODEL=str(tmp_path)))


def test_directory_without_onnx_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match="no ONNX model"):
        LocalEmbedder.from_settings(settings(SMRITI_LOCAL_MODEL=str(tmp_path)), explicit=True)


def test_explicit_without_model_says_what_to_set(tmp_path: Path) -> None:
    offline = settings(HF_HUB_OFFLINE="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    with pytest.raises(
        ConfigError, match="SMRITI_EMBEDDER=local needs a model.*SMRITI_LOCAL_MODEL"
    ):
        LocalEmbedder.from_settings(offline, explicit=True)


def test_bad_thread_count_is_a_config_error(model_dir: Path) -> None:
    with pytest.raises(ConfigError, match="SMRITI_LOCAL_THREADS"):
        LocalEmbedder.from_settings(
            settings(SMRITI_LOCAL_MODEL=str(model_dir), SMRITI_LOCAL_THREADS="0")
        )


def _engine_settings(tmp_path: Path, **env: str) -> Settings:
    return settings(STORAGE_LOCATION=str(tmp_path), **env)


def test_plugin_wins_auto_over_lexical(tmp_path: Path, model_dir: Path) -> None:
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(local_plugin)
    s = _engine_settings(tmp_path, SMRITI_LOCAL_MODEL=str(model_dir))
    assert choose_embedder(Registry(pm), s).name == "local"


def test_explicit_selection_uses_the_plugin(tmp_path: Path, model_dir: Path) -> None:
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(local_plugin)
    s = _engine_settings(tmp_path, SMRITI_EMBEDDER="local", SMRITI_LOCAL_MODEL=str(model_dir))
    embedder = choose_embedder(Registry(pm), s)
    assert isinstance(embedder, LocalEmbedder)


def test_auto_falls_back_to_lexical_without_model(tmp_path: Path) -> None:
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(local_plugin)
    s = _engine_settings(tmp_path, HF_HUB_OFFLINE="1", XDG_CACHE_HOME=str(tmp_path / "cache"))
    embedder = choose_embedder(Registry(pm), s)
    assert embedder.wait(30)  # type: ignore[attr-defined]
    assert embedder.model_id == "lexical:v1:384"
    assert embedder.embed(["hello"]).shape == (1, 384)
