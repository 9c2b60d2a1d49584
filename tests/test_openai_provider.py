"""The OpenAI-compatible embedder and cue extractor, with the real ``openai`` client
talking to the fake OpenAI server (retries, timeouts and parsing happen for real)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import structlog

from smriti.config import Settings
from smriti.default_plugins._openai_common import PLACEHOLDER_KEY, RetryPolicy
from smriti.default_plugins.openai_embedder import OpenAIEmbedder
from smriti.default_plugins.openai_extractor import (
    MAX_CUES,
    OpenAICueExtractor,
    parse_extraction,
)
from smriti.errors import ConfigError, ProviderError
from smriti.model import CUE_TYPES, MEMORY_TYPES, CueRef
from smriti.plugins import Registry, create_plugin_manager
from smriti.testing.fake_openai import FakeOpenAI, fake_embedding

SECRET = "sk-live-SECRET-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dims=32, api_key=SECRET) as fake:
        yield fake


def settings_for(server: FakeOpenAI, **env: str) -> Settings:
    return Settings.from_env(server.env(**env))


def fast(component: OpenAIEmbedder | OpenAICueExtractor) -> None:
    """Shrink backoff so that retry tests take milliseconds (retry counts unchanged)."""
    component.policy.backoff_base = 0.01
    component.policy.backoff_cap = 0.05


@pytest.fixture
def embedder(server: FakeOpenAI) -> Iterator[OpenAIEmbedder]:
    emb = OpenAIEmbedder.from_settings(settings_for(server))
    assert emb is not None
    fast(emb)
    yield emb
    emb.close()


@pytest.fixture
def extractor(server: FakeOpenAI) -> Iterator[OpenAICueExtractor]:
    ext = OpenAICueExtractor.from_settings(settings_for(server))
    assert ext is not None
    fast(ext)
    yield ext
    ext.close()


# --- configuration ---------------------------------------------------------------


def test_not_configured_without_key_or_url() -> None:
    settings = Settings.from_env({})
    assert OpenAIEmbedder.from_settings(settings) is None
    assert OpenAICueExtractor.from_settings(settings) is None


def test_explicit_without_configuration_names_the_variables() -> None:
    settings = Settings.from_env({})
    with pytest.raises(ConfigError, match="EMBEDDING_API_KEY.*LLM_API_KEY"):
        OpenAIEmbedder.from_settings(settings, explicit=True)
    with pytest.raises(ConfigError, match="LLM_API_KEY"):
        OpenAICueExtractor.from_settings(settings, explicit=True)


def test_registered_by_the_builtin_plugin() -> None:
    pm, _ = create_plugin_manager(load_entry_points=False, environ={})
    registry = Registry(pm)
    assert registry.get("embedder", "openai", "SMRITI_EMBEDDER") is OpenAIEmbedder
    assert registry.get("extractor", "openai", "SMRITI_CUE_EXTRACTOR") is OpenAICueExtractor


def test_embedding_key_falls_back_to_llm_key(server: FakeOpenAI) -> None:
    """SPEC §9.17: the minimal documented setup (LLM_API_KEY only) must embed."""
    emb = OpenAIEmbedder.from_settings(settings_for(server))
    assert emb is not None
    emb.embed(["hello"])
    assert server.requests_to("/embeddings")[-1].headers["authorization"] == f"Bearer {SECRET}"


def test_embedding_key_takes_precedence(server: FakeOpenAI) -> None:
    emb = OpenAIEmbedder.from_settings(settings_for(server, EMBEDDING_API_KEY="sk-embed-only"))
    assert emb is not None
    emb.embed(["hello"])
    assert server.requests_to("/embeddings")[-1].headers["authorization"] == "Bearer sk-embed-only"


def test_local_embedding_server_needs_no_key(server: FakeOpenAI) -> None:
    settings = Settings.from_env({"EMBEDDING_BASE_URL": server.base_url})
    emb = OpenAIEmbedder.from_settings(settings)
    assert emb is not None
    assert emb.embed(["hello"]).shape == (1, 32)
    sent = server.requests_to("/embeddings")[-1].headers["authorization"]
    assert sent == f"Bearer {PLACEHOLDER_KEY}"


def test_local_llm_server_needs_no_key(server: FakeOpenAI) -> None:
    settings = Settings.from_env({"LLM_BASE_URL": server.base_url})
    ext = OpenAICueExtractor.from_settings(settings)
    assert ext is not None
    assert ext.extract("Alice visited Copenhagen in spring").cues
    assert OpenAIEmbedder.from_settings(settings) is None  # embeddings need their own URL


# --- embeddings --------------------------------------------------------------------


def test_embeddings_are_unit_float32_rows_in_input_order(embedder: OpenAIEmbedder) -> None:
    texts = ["the cat sat on the mat", "a cat on a mat", "quarterly tax filing deadline"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    expected = np.asarray([fake_embedding(t, 32) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_embeddings_are_deterministic(embedder: OpenAIEmbedder) -> None:
    first = embedder.embed(["stable text"])
    np.testing.assert_array_equal(first, embedder.embed(["stable text"]))


def test_dims_learned_from_first_vector(embedder: OpenAIEmbedder) -> None:
    assert embedder.dims is None
    assert embedder.model_id.endswith(":?")
    embedder.embed(["x"])
    assert embedder.dims == 32
    assert embedder.model_id.endswith(":fake-embed:32")
    assert SECRET not in embedder.model_id and SECRET not in repr(embedder)


def test_changed_dimension_is_an_error(server: FakeOpenAI, embedder: OpenAIEmbedder) -> None:
    embedder.embed(["x"])
    server.dims = 16
    with pytest.raises(ProviderError, match="returned 16-dimensional"):
        embedder.embed(["y"])


def test_embedding_dims_sent_to_models_that_support_it(server: FakeOpenAI) -> None:
    settings = settings_for(server, EMBEDDING_MODEL="text-embedding-3-small", EMBEDDING_DIMS="24")
    emb = OpenAIEmbedder.from_settings(settings)
    assert emb is not None and emb.dims == 24
    assert emb.embed(["a", "b"]).shape == (2, 24)
    assert server.requests_to("/embeddings")[-1].body["dimensions"] == 24


def test_embedding_dims_mismatch_raises(server: FakeOpenAI) -> None:
    emb = OpenAIEmbedder.from_settings(settings_for(server, EMBEDDING_DIMS="64"))
    assert emb is not None
    with pytest.raises(ProviderError, match="EMBEDDING_DIMS"):
        emb.embed(["a"])
    assert "dimensions" not in server.requests_to("/embeddings")[-1].body  # fake-embed: no


def test_large_input_is_batched(server: FakeOpenAI, embedder: OpenAIEmbedder) -> None:
    texts = [f"text number {i}" for i in range(600)]
    vectors = embedder.embed(texts)
    assert vectors.shape == (600, 32)
    sizes = [len(r.body["input"]) for r in server.requests_to("/embeddings")]
    assert sizes == [256, 256, 88]
    np.testing.assert_allclose(vectors[599], fake_embedding("text number 599", 32), atol=1e-6)


def test_empty_inputs(embedder: OpenAIEmbedder) -> None:
    assert embedder.embed([]).shape[0] == 0
    vectors = embedder.embed(["", "real text"])  # OpenAI rejects "": we send a blank
    assert vectors.shape == (2, 32)


# --- retries and failures ------------------------------------------------------


def test_rate_limit_is_retried_honouring_retry_after(
    server: FakeOpenAI, embedder: OpenAIEmbedder
) -> None:
    server.fail_next(1, status=429, retry_after=0.3)
    started = time.monotonic()
    assert embedder.embed(["hello"]).shape == (1, 32)
    assert time.monotonic() - started >= 0.3
    assert len(server.requests_to("/embeddings")) == 2


def test_retry_after_is_capped(server: FakeOpenAI, embedder: OpenAIEmbedder) -> None:
    embedder.policy.retry_after_cap = 0.1
    server.fail_next(1, status=429, retry_after=3600)
    started = time.monotonic()
    embedder.embed(["hello"])
    assert time.monotonic() - started < 2


def test_persistent_server_error_gives_up_after_max_retries(server: FakeOpenAI) -> None:
    emb = OpenAIEmbedder.from_settings(settings_for(server, LLM_MAX_RETRIES="2"))
    assert emb is not None
    fast(emb)
    server.fail_next(100, status=500)
    started = time.monotonic()
    with pytest.raises(ProviderError, match="3 attempts.*HTTP 500"):
        emb.embed(["hello"])
    assert time.monotonic() - started < 2
    assert len(server.requests_to("/embeddings")) == 3


def test_client_errors_are_not_retried(server: FakeOpenAI, embedder: OpenAIEmbedder) -> None:
    server.fail_next(5, status=401)
    with pytest.raises(ProviderError, match="HTTP 401"):
        embedder.embed(["hello"])
    assert len(server.requests_to("/embeddings")) == 1


def test_slow_response_times_out(server: FakeOpenAI) -> None:
    emb = OpenAIEmbedder.from_settings(settings_for(server, LLM_TIMEOUT="0.3", LLM_MAX_RETRIES="1"))
    assert emb is not None
    fast(emb)
    server.delay = 3
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        emb.embed(["hello"])
    assert time.monotonic() - started < 2
    assert len(server.requests_to("/embeddings")) == 2


def test_broken_http_body_is_retried(server: FakeOpenAI, embedder: OpenAIEmbedder) -> None:
    server.malformed_next(1, kind="http")
    assert embedder.embed(["hello"]).shape == (1, 32)
    assert len(server.requests_to("/embeddings")) == 2


def test_extractor_retries_transport_errors(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    server.fail_next(2, status=503)
    assert extractor.extract("Alice moved to Lisbon").cues
    assert len(server.requests_to("/chat/completions")) == 3


def test_extractor_times_out(server: FakeOpenAI) -> None:
    ext = OpenAICueExtractor.from_settings(
        settings_for(server, LLM_TIMEOUT="0.3", LLM_MAX_RETRIES="0")
    )
    assert ext is not None
    server.delay = 3
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        ext.extract("Alice moved to Lisbon")
    assert time.monotonic() - started < 2


# --- extraction --------------------------------------------------------------------


def test_extraction_uses_strict_json_schema_at_temperature_zero(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    result = extractor.extract("Yesterday Alice showed Bob the Copenhagen harbour")
    names = {c.name for c in result.cues}
    assert {"Alice", "Bob", "Copenhagen"} <= names
    assert result.memory_type == "episodic" and result.summary
    body = server.requests_to("/chat/completions")[-1].body
    assert body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    spec = body["response_format"]["json_schema"]
    assert spec["strict"] is True
    schema = spec["schema"]
    assert schema["properties"]["memory_type"]["enum"] == list(MEMORY_TYPES)
    assert schema["properties"]["cues"]["items"]["properties"]["type"]["enum"] == list(CUE_TYPES)
    assert (schema["properties"]["cues"]["minItems"], schema["properties"]["cues"]["maxItems"]) == (
        3,
        MAX_CUES,
    )
    assert body["messages"][-1] == {
        "role": "user",
        "content": "Yesterday Alice showed Bob the Copenhagen harbour",
    }


def test_query_extraction_uses_a_cue_only_prompt(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    extractor.extract("long memory text about Alice")
    store_prompt = server.requests_to("/chat/completions")[-1].body["messages"][0]["content"]
    result = extractor.extract("what does Alice like?", query=True)
    assert [c.name for c in result.cues][:1] == ["Alice"]
    body = server.requests_to("/chat/completions")[-1].body
    assert len(body["messages"][0]["content"]) < len(store_prompt)
    assert list(body["response_format"]["json_schema"]["schema"]["properties"]) == ["cues"]


def test_json_schema_rejected_falls_back_to_json_object_and_remembers(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    server.reject_json_schema = True
    assert extractor.extract("Alice adopted a greyhound named Comet").cues
    formats = [r.body["response_format"]["type"] for r in server.requests_to("/completions")]
    assert formats == ["json_schema", "json_object"]
    assert extractor.response_mode == "json_object"
    extractor.extract("Bob planted tomatoes")
    assert server.requests_to("/completions")[-1].body["response_format"]["type"] == "json_object"


def test_no_json_mode_at_all_falls_back_to_plain_prompt(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    server.reject_json_schema = server.reject_json_object = True
    result = extractor.extract("Alice adopted a greyhound named Comet")
    assert {"Alice", "Comet"} <= {c.name for c in result.cues}  # parsed out of ```json fences
    assert "response_format" not in server.requests_to("/completions")[-1].body
    assert extractor.response_mode == "plain"


def test_malformed_output_is_retried(server: FakeOpenAI, extractor: OpenAICueExtractor) -> None:
    server.malformed_next(1, kind="text")
    server.malformed_next(1, kind="broken")
    assert extractor.extract("Alice adopted a greyhound named Comet").cues
    assert len(server.requests_to("/completions")) == 3


def test_persistently_malformed_output_raises(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    server.malformed_next(10, kind="broken")
    with pytest.raises(ProviderError, match="malformed"):
        extractor.extract("Alice adopted a greyhound named Comet")
    assert len(server.requests_to("/completions")) == extractor.policy.max_retries + 1


def test_custom_chat_reply_is_parsed_tolerantly(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    server.chat_reply = lambda _text: {
        "Summary": "A cat.",
        "Memory_Type": "Fact",
        "entities": ["Tom"],
        "keywords": ["whiskers", "  "],
    }
    result = extractor.extract("Tom the cat has whiskers")
    assert result.summary == "A cat." and result.memory_type == "semantic"
    assert result.cues == [CueRef("Tom", "entity"), CueRef("whiskers", "keyword")]


def test_temperature_dropped_when_the_model_rejects_it(
    server: FakeOpenAI, extractor: OpenAICueExtractor
) -> None:
    server.reject_temperature = True
    assert extractor.extract("Alice adopted a greyhound named Comet").cues
    bodies = [r.body for r in server.requests_to("/completions")]
    assert ["temperature" in b for b in bodies] == [True, False]
    assert bodies[-1]["response_format"]["type"] == "json_schema"  # format kept


def test_concurrent_calls_are_not_serialised(
    server: FakeOpenAI, embedder: OpenAIEmbedder, extractor: OpenAICueExtractor
) -> None:
    """SPEC §9.12: provider calls from several requests run in parallel."""
    server.delay = 0.4
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        vectors = list(pool.map(lambda i: embedder.embed([f"text {i}"]), range(4)))
        found = list(pool.map(lambda i: extractor.extract(f"Alice number {i}"), range(4)))
    assert time.monotonic() - started < 8 * 0.4 * 0.75
    assert all(v.shape == (1, 32) for v in vectors) and all(f.cues for f in found)


# --- tolerant parsing ----------------------------------------------------------------


def test_parse_strips_code_fences_and_chatter() -> None:
    reply = (
        "Sure! Here you go:\n```json\n"
        '{"summary": "S.", "memory_type": "procedural",'
        ' "cues": [{"name": "git", "type": "keyword"}]}'
        "\n```\nLet me know if you need more."
    )
    result = parse_extraction(reply)
    assert result.summary == "S." and result.memory_type == "procedural"
    assert result.cues == [CueRef("git", "keyword")]


def test_parse_takes_the_first_object_in_prose() -> None:
    reply = 'The answer {is} here: {"cues": ["alpha", "beta"], "summary": "x"} and {"cues": []}'
    assert [c.name for c in parse_extraction(reply).cues] == ["alpha", "beta"]


def test_parse_alternative_keys_and_case_insensitive_types() -> None:
    reply = json.dumps(
        {
            "abstract": "About Paris.",
            "type": "EPISODIC",
            "entities": [{"text": "Paris", "kind": "Location"}],
            "keywords": "croissant, metro",
            "concepts": [{"name": "travel", "type": "CONCEPT"}],
        }
    )
    result = parse_extraction(reply)
    assert result.summary == "About Paris." and result.memory_type == "episodic"
    assert result.cues == [
        CueRef("Paris", "entity"),
        CueRef("croissant", "keyword"),
        CueRef("metro", "keyword"),
        CueRef("travel", "concept"),
    ]


def test_parse_grouped_cues_and_wrapped_object() -> None:
    reply = json.dumps({"result": {"cues": {"entity": ["Ada"], "context": ["work"]}}})
    assert parse_extraction(reply).cues == [CueRef("Ada", "entity"), CueRef("work", "context")]


def test_parse_unknown_types_default_sensibly() -> None:
    reply = json.dumps(
        {"memory_type": "dream", "cues": [{"name": "moon", "type": "celestial"}, {"name": ""}]}
    )
    result = parse_extraction(reply, text="I saw the moon.")
    assert result.memory_type == "semantic"
    assert result.cues == [CueRef("moon", "keyword")]
    assert result.summary == "I saw the moon."  # missing summary: the text itself


def test_parse_clamps_and_deduplicates_cues() -> None:
    names = [f"cue{i}" for i in range(15)] + ["CUE1", "cue2"]
    result = parse_extraction(json.dumps({"cues": names}))
    assert [c.name for c in result.cues] == [f"cue{i}" for i in range(MAX_CUES)]


@pytest.mark.parametrize("reply", ["", "no json here", "[1, 2]", '{"summary": "x", "cues": []}'])
def test_parse_rejects_replies_without_cues(reply: str) -> None:
    with pytest.raises(ValueError):
        parse_extraction(reply)


def test_parse_query_accepts_no_cues() -> None:
    assert parse_extraction('{"cues": []}', query=True).cues == []


# --- secrets ---------------------------------------------------------------------------


def test_secrets_never_logged_or_raised(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    emb = OpenAIEmbedder.from_settings(settings_for(server, LLM_MAX_RETRIES="1"))
    ext = OpenAICueExtractor.from_settings(settings_for(server, LLM_MAX_RETRIES="1"))
    assert emb is not None and ext is not None
    fast(emb)
    fast(ext)
    echo = f"Incorrect API key provided: {SECRET}"
    with structlog.testing.capture_logs() as logs:
        emb.embed(["warm up"])
        server.fail_next(2, status=500, message=echo)
        with pytest.raises(ProviderError) as emb_err:
            emb.embed(["hello"])
        server.fail_next(2, status=500, message=echo)
        with pytest.raises(ProviderError) as ext_err:
            ext.extract("hello there")
    assert any(entry.get("log_level") == "warning" for entry in logs)  # retries were logged
    everything = " ".join([repr(logs), caplog.text, str(emb_err.value), str(ext_err.value)])
    assert SECRET not in everything
    assert SECRET not in repr(emb) + repr(ext) + emb.model_id
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


# --- the fake server itself ---------------------------------------------------------------


def test_fake_server_base64_embeddings_match_float(server: FakeOpenAI) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    default = client.embeddings.create(model="m", input=["hello world"])  # base64 on the wire
    assert server.requests[-1].body["encoding_format"] == "base64"
    np.testing.assert_allclose(default.data[0].embedding, fake_embedding("hello world", 32))
    client.close()


def test_retry_policy_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=5, backoff_base=1.0, backoff_cap=4.0)
    assert 0.5 <= policy.delay(0) <= 1.0
    assert 2.0 <= policy.delay(2) <= 4.0
    assert 2.0 <= policy.delay(8) <= 4.0
    assert policy.delay(0, retry_after=100.0) == policy.retry_after_cap
