"""Settings: every variable parsed, one clear line per bad value, secrets hidden."""

from __future__ import annotations

from pathlib import Path

import pytest

from smriti.config import Settings, settings_table, validate_user
from smriti.errors import ConfigError


def test_defaults_without_environment() -> None:
    s = Settings.from_env({})
    assert s.db_type == "auto"
    assert s.llm_model == "gpt-4o-mini"
    assert s.embedding_model == "text-embedding-3-small"
    assert s.embedding_dims is None
    assert s.backup_type == "none"
    assert s.backup_sync_interval == 60
    assert s.consolidation_interval == 3600
    assert s.storage_location == Path.home() / ".smriti"
    assert validate_user(s.accessing_user) == s.accessing_user


def test_reads_reference_variable_names(tmp_path: Path) -> None:
    s = Settings.from_env(
        {
            "ACCESSING_USER": "alice",
            "STORAGE_LOCATION": str(tmp_path),
            "DB_TYPE": "Neo4j",
            "EMBEDDING_DIMS": "256",
            "BACKUP_SYNC_INTERVAL": "0",
        }
    )
    assert (s.accessing_user, s.storage_location, s.db_type) == ("alice", tmp_path, "neo4j")
    assert s.embedding_dims == 256
    assert s.backup_sync_interval == 0


@pytest.mark.parametrize(
    ("var", "value", "words"),
    [
        ("EMBEDDING_DIMS", "abc", ["EMBEDDING_DIMS", "integer"]),
        ("CONSOLIDATION_INTERVAL", "-5", ["CONSOLIDATION_INTERVAL", "range"]),
        ("ASSOCIATION_THRESHOLD", "nan", ["ASSOCIATION_THRESHOLD"]),
        ("LLM_BASE_URL", "api.openai.com", ["LLM_BASE_URL", "URL"]),
        ("LOG_LEVEL", "loud", ["LOG_LEVEL", "debug"]),
        ("ACCESSING_USER", "../x", ["ACCESSING_USER"]),
        ("DB_TYPE", "kuzu; rm -rf", ["DB_TYPE"]),
    ],
)
def test_invalid_value_is_one_line_naming_the_variable(
    var: str, value: str, words: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({var: value})
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    "name",
    ["../x", "a/b", "a\\b", "'quoted'", '"q"', "a\x00b", "x" * 1000, "", ".", "..", "-x", "a b"],
)
def test_unsafe_user_names_rejected(name: str) -> None:
    with pytest.raises(ConfigError):
        validate_user(name)


@pytest.mark.parametrize("name", ["alice", "bob_2", "a.b-c", "x" * 64])
def test_safe_user_names_accepted(name: str) -> None:
    assert validate_user(name) == name


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("Bob_2", "bob_2"),
        ("ALICE", "alice"),
        ("\uff21lice", "alice"),  # a full-width capital A (NFKC)
        ("\u212aate", "kate"),  # the Kelvin sign, which NFKC makes a K
        ("\ufb00ion", "ffion"),  # the ff ligature
    ],
)
def test_every_spelling_of_a_name_is_one_canonical_name(given: str, canonical: str) -> None:
    assert validate_user(given) == canonical
    assert Settings.from_env({"ACCESSING_USER": given}).accessing_user == canonical
    assert Settings.from_env({}, accessing_user=given).user_dir().name == canonical


@pytest.mark.parametrize("name", ["\u0130stanbul", "caf\u00e9", "\u03a9mega"])
def test_names_that_stay_non_ascii_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="upper and lower case are the same name"):
        validate_user(name)


def test_secrets_never_in_repr_or_public_view() -> None:
    s = Settings.from_env(
        {
            "LLM_API_KEY": "sk-live-123",
            "EMBEDDING_API_KEY": "emb-key-7",
        }
    )
    text = repr(s) + repr(s.public())
    for secret in ("sk-live-123", "emb-key-7"):
        assert secret not in text
    assert s.public()["LLM_API_KEY"] == "set"
    assert s.public()["EMBEDDING_API_KEY"] == "set"
    assert Settings.from_env({}).public()["EMBEDDING_API_KEY"] == "unset"


def test_embedding_key_and_url_fall_back_to_llm() -> None:
    s = Settings.from_env({"LLM_API_KEY": "k", "LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    assert s.effective_embedding_api_key == "k"
    assert s.effective_embedding_base_url == "http://127.0.0.1:9/v1"
    s2 = Settings.from_env({"LLM_API_KEY": "k", "EMBEDDING_API_KEY": "e"})
    assert s2.effective_embedding_api_key == "e"


def test_overrides_beat_environment(tmp_path: Path) -> None:
    s = Settings.from_env(
        {"ACCESSING_USER": "alice"}, accessing_user="bob", storage_location=str(tmp_path)
    )
    assert s.accessing_user == "bob" and s.storage_location == tmp_path
    with pytest.raises(ConfigError):
        Settings.from_env({}, accessing_user="../etc")


def test_settings_table_lists_every_variable() -> None:
    names = [name for name, _ in settings_table()]
    for var in (
        "ACCESSING_USER",
        "STORAGE_LOCATION",
        "DB_TYPE",
        "LLM_BASE_URL",
        "EMBEDDING_API_KEY",
        "BACKUP_TYPE",
        "CONSOLIDATION_INTERVAL",
    ):
        assert var in names
    # The plugins' settings are theirs (smriti.Setting on their classes), not the core's.
    for var in ("GIT_BASE_URL", "S3_ENDPOINT", "NEO4J_URI", "FALKOR_ADDR", "SMRITI_LOCAL_MODEL"):
        assert var not in names


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_blank_accessing_user_is_an_error_not_the_os_user(blank: str) -> None:
    with pytest.raises(ConfigError, match="ACCESSING_USER is set but empty") as caught:
        Settings.from_env({"ACCESSING_USER": blank})
    assert "\n" not in str(caught.value)
    assert Settings.from_env({}).accessing_user == Settings().accessing_user  # unset: OS user
    assert Settings.from_env({"ACCESSING_USER": blank}, accessing_user="bob").accessing_user == (
        "bob"
    )
