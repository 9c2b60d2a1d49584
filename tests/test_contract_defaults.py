"""The storage contract's derived defaults (``smriti.backend.derived``) are correct: the
conformance suite and recall equality pass on SQLite with every optional method left to
the base class, so only the sixteen required methods are SQLite's own."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from smriti.backend import StorageBackend
from smriti.default_plugins.sqlite.backend import DB_FILE, SqliteBackend
from smriti.testing import RecallEqualityTests, StorageBackendTests

#: Besides the classmethod that builds an instance (``from_options``).
REQUIRED = {
    "open",
    "close",
    "get_meta",
    "set_meta",
    "add_memory",
    "update_engrams",
    "delete_engrams",
    "delete_orphan_cues",
    "import_records",
    "seek",
    "iter_engrams",
    "iter_cues",
    "iter_links",
    "iter_associations",
    "iter_cooccurrences",
}

#: The contract's methods with a default, besides the lifecycle's context manager.
DERIVED = sorted(
    name
    for name, member in vars(StorageBackend).items()
    if inspect.isfunction(member)
    and not getattr(member, "__isabstractmethod__", False)
    and not name.startswith("_")
    and name not in {"from_settings", "needs_reopen"}
)


def _on_defaults() -> type[SqliteBackend]:
    """SqliteBackend with each derived method of the contract back to its default."""
    return type("SqliteOnDefaults", (SqliteBackend,), {n: vars(StorageBackend)[n] for n in DERIVED})


OnDefaults = _on_defaults()
Make = Callable[[str], StorageBackend]


def test_the_contract_requires_sixteen_methods() -> None:
    required = set(StorageBackend.__abstractmethods__)
    assert len(required) == 16
    assert required - {"from_options", "from_settings"} == REQUIRED
    assert {"get_engrams", "list_page", "neighbourhood", "counts", "get_cues"} <= set(DERIVED)
    assert not hasattr(StorageBackend, "add_memory_with_search")
    assert not hasattr(StorageBackend, "list_engrams")


def test_the_subclass_really_runs_the_defaults() -> None:
    # Without this the suites below would test SQLite's own overrides again.
    for name in DERIVED:
        assert getattr(OnDefaults, name) is vars(StorageBackend)[name], name
    overridden = {n for n in DERIVED if getattr(SqliteBackend, n) is not vars(StorageBackend)[n]}
    assert {"get_engrams", "list_page", "neighbourhood", "counts", "get_cues"} <= overridden


@pytest.fixture
def defaults_factory(tmp_path: Path) -> Iterator[Make]:
    made: list[StorageBackend] = []

    def make(user: str) -> StorageBackend:
        backend = OnDefaults(user, tmp_path / "store" / user / DB_FILE)
        backend.open()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


class TestDefaultsConformance(StorageBackendTests):
    """Every clause of the contract, answered by the defaults over SQLite's streams."""

    @pytest.fixture
    def backend_factory(self, defaults_factory: Make) -> Make:
        return defaults_factory


class TestDefaultsRecallEquality(RecallEqualityTests):
    """The engine recalls the same on the defaults as on SQLite's own reads."""

    @pytest.fixture
    def backend_factory(self, defaults_factory: Make) -> Make:
        return defaults_factory
