"""A store keeps the embedding model its vectors came from (``Engine._check_model``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from smriti.errors import ConfigError
from smriti.testing.fake_openai import FakeOpenAI

from .conftest import EngineFactory


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dims=384) as server:
        yield server


def test_auto_keeps_the_embedder_a_store_was_made_with(
    engine_factory: EngineFactory, fake: FakeOpenAI
) -> None:
    lexical = engine_factory()  # no API configured: the lexical embedder
    lexical.store("Priya prefers tabs over spaces in Go code")
    made_with = lexical.embedder.model_id
    lexical.close()

    api = {"EMBEDDING_BASE_URL": fake.base_url, "EMBEDDING_MODEL": "fake-embed"}
    engine = engine_factory(**api)  # auto now prefers the API
    assert engine.embedder.name == "openai"
    found = engine.recall("Priya tabs", limit=1)
    assert found[0].engram.content.startswith("Priya")
    assert engine.embedder.model_id == made_with  # kept, with a warning naming reembed
    engine.store("Ravi's cat Biscuit only eats tuna")
    assert engine.stats()["embedder"] == "lexical"
    engine.close()

    named = engine_factory(SMRITI_EMBEDDER="openai", **api)
    with pytest.raises(ConfigError, match="embedded with 'lexical.*smriti reembed"):
        named.recall("Priya tabs")
