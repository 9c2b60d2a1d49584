"""Secrets never stored, in the engine: store, correct, update and import screen what
they write (SMRITI_SECRETS), before cues, embedding, dedup key or write."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from smriti.errors import InvalidInput
from smriti.portable import export_store, import_store
from smriti.testing.fake_secrets import example

from .conftest import EngineFactory


def _fakes(seed: int, *kinds: str) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [example(kind, rng) for kind in kinds]


def _everything(engine) -> str:  # noqa: ANN001 - an Engine
    """Every engram field and cue name of the store, as one string."""
    parts: list[str] = []
    for e in engine.backend.iter_engrams():
        parts += [e.content, e.summary, e.source, *e.tags]
    ids = {link.cue_id for e in engine.backend.iter_engrams() for link in _links(engine, e.id)}
    parts += [c.name for c in engine.backend.get_cues_by_id(list(ids))]
    return "\n".join(parts)


def _links(engine, memory_id: str):  # noqa: ANN001, ANN202
    from smriti.backend import Expand

    return engine.backend.neighbourhood(Expand([memory_id], 100, 0, 0)).links


def test_store_redacts_content_tags_and_source_before_cues_and_embedding(
    engine_factory: EngineFactory,
) -> None:
    engine = engine_factory()
    (s1, token), (s2, key) = _fakes(1, "github-token", "aws-access-key")
    outcome = engine.store(f"{s1} <private>my diary</private>", tags=f"ci,{key}", source=key)
    data = outcome.to_dict()
    assert data["redacted"] == [
        {"kind": "private", "count": 1},
        {"kind": "github-token", "count": 1},
        {"kind": "aws-access-key", "count": 2},
    ]
    stored = _everything(engine)
    assert "[redacted:github-token]" in stored and "[redacted:aws-access-key]" in stored
    for secret in (token, key, key.lower(), token.lower(), "my diary"):
        assert secret not in stored
    # the embedding is the redacted text's: recall by the marker finds it
    hits = engine.recall("redacted github token", limit=3)
    assert outcome.engram.id in [h.engram.id for h in hits]
    assert token not in hits[0].engram.content


def test_refuse_stores_nothing_and_names_the_kind(engine_factory: EngineFactory) -> None:
    engine = engine_factory(SMRITI_SECRETS="refuse")
    ((sentence, _),) = _fakes(2, "stripe-key")
    with pytest.raises(InvalidInput, match=r"stripe-key.*nothing was stored"):
        engine.store(sentence)
    with pytest.raises(InvalidInput, match="stripe-key"):
        engine.store("an ordinary memory", tags=sentence.split()[-1])
    assert engine.backend.count_engrams() == 0
    engine.store("an ordinary memory <private>not this</private>")
    assert "not this" not in _everything(engine)


def test_allow_keeps_secrets_but_never_private_text(engine_factory: EngineFactory) -> None:
    engine = engine_factory(SMRITI_SECRETS="allow")
    ((sentence, secret),) = _fakes(3, "openai-key")
    outcome = engine.store(f"{sentence} <PRIVATE>pin 4711\n</Private>")
    assert outcome.to_dict()["redacted"] == [{"kind": "private", "count": 1}]
    assert secret in outcome.engram.content and "4711" not in outcome.engram.content
    with pytest.raises(InvalidInput, match="only <private> text"):
        engine.store("<private>all of it")
    assert engine.backend.count_engrams() == 1


def test_correct_and_update_screen_their_text(engine_factory: EngineFactory) -> None:
    engine = engine_factory()
    (s1, password), (_, token) = _fakes(4, "password", "npm-token")
    first = engine.store("The NAS admin account is nas-admin")
    done = engine.correct(first.engram.id, f"The NAS admin account changed. {s1}")
    assert done["memory"]["redacted"] == [{"kind": "password", "count": 1}]
    changed = engine.update(done["new_id"], tags=["nas", token])
    assert changed["redacted"] == [{"kind": "npm-token", "count": 1}]
    assert changed["memory"]["tags"] == ["nas", "[redacted:npm-token]"]
    stored = _everything(engine)
    assert password not in stored and token not in stored


def test_two_secrets_of_one_kind_in_the_same_sentence_are_one_memory(
    engine_factory: EngineFactory,
) -> None:
    engine = engine_factory()
    a = engine.store("The CI token is ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")
    b = engine.store("The CI token is ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2")
    # once redacted both say the same thing: the second is a repeat, not a new memory
    assert b.deduplicated and b.engram.id == a.engram.id
    assert b.to_dict()["redacted"] == [{"kind": "github-token", "count": 1}]


def _export_with_secrets(engine_factory: EngineFactory, tmp_path: Path) -> tuple[Path, list[str]]:
    source = engine_factory("bob", SMRITI_SECRETS="allow")
    (s1, k1), (s2, k2) = _fakes(5, "google-api-key", "url-password")
    source.store(s1, tags="maps")
    source.store(s2)
    source.store("<private>x</private> The plain memory stays as it is")
    path = tmp_path / "export.jsonl"
    export_store(source, path, progress=False)
    assert k1 in path.read_text() and k2 in path.read_text()
    return path, [k1, k2]


def test_import_redacts_the_file_secrets_and_cues(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    path, keys = _export_with_secrets(engine_factory, tmp_path)
    target = engine_factory("carol")
    report = import_store(target, path, progress=False)
    assert report.counts["engrams"] == 3
    stored = _everything(target)
    assert "[redacted:google-api-key]" in stored and "[redacted:url-password]" in stored
    assert "The plain memory stays as it is" in stored
    for key in keys:
        assert key not in stored and key.lower() not in stored
    hits = target.recall("google api key maps", limit=5)
    assert hits and all(k not in h.engram.content for h in hits for k in keys)


def test_import_in_refuse_mode_imports_nothing(
    engine_factory: EngineFactory, tmp_path: Path
) -> None:
    path, _ = _export_with_secrets(engine_factory, tmp_path)
    target = engine_factory("dave", SMRITI_SECRETS="refuse")
    with pytest.raises(InvalidInput, match=r"google-api-key.*nothing was stored"):
        import_store(target, path, progress=False)
    assert target.backend.count_engrams() == 0
