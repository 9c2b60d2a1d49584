"""The backup-provider conformance suite: one test per clause of the BackupProvider contract.

Subclass :class:`BackupProviderTests` and override two fixtures:

- ``provider_factory`` returns ``make(overrides=None, user="alice") -> BackupProvider``.
  Every provider made by one factory talks to the same remote (bare repository,
  bucket, ...); ``overrides`` are settings overrides (``Settings.from_env`` keyword
  arguments). The suite passes a different ``storage_location`` to play "another
  machine". The fixture owns cleanup.
- ``unreachable_overrides`` returns settings overrides that point the provider at a
  remote that cannot be reached (a closed port, a missing path).

The clauses on ``fetch`` versions and the conditional ``push_if`` (a stale push never
overwrites a newer snapshot) apply when ``conditional_writes`` is True (the default);
a provider that keeps the base class's last-writer-wins defaults sets it to False.

Example::

    class TestMyProvider(BackupProviderTests):
        @pytest.fixture
        def provider_factory(self, tmp_path, my_server):
            def make(overrides=None, user="alice"):
                settings = Settings.from_env({}, storage_location=str(tmp_path / "home"),
                                             **{"my_url": my_server.url, **(overrides or {})})
                return MyProvider(settings, user)
            return make
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from smriti.backup import BackupProvider, SyncReport
from smriti.errors import BackupError

MakeProvider = Callable[..., BackupProvider]
SNAPSHOT = "memory.jsonl"


def write_snapshot(directory: Path, files: dict[str, bytes]) -> Path:
    """Create ``directory`` holding exactly ``files`` (name → bytes); return it."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def read_dir(directory: Path) -> dict[str, bytes]:
    """The regular files of ``directory`` as name → bytes."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _jsonl(tag: str, lines: int = 50) -> bytes:
    rows = [
        f'{{"kind":"engram","id":"e{i:05d}","content":"{tag} {i} ünïcode"}}\n' for i in range(lines)
    ]
    return "".join(rows).encode("utf-8")


class BackupProviderTests:
    """Base class of backup-provider conformance tests (langchain-tests style)."""

    #: Size of the large-snapshot test file (above boto3's default multipart threshold).
    large_snapshot_bytes: ClassVar[int] = 9 * 1024 * 1024

    # -- fixtures ------------------------------------------------------------------------
    @pytest.fixture
    def provider_factory(self) -> MakeProvider:
        """Return ``make(overrides=None, user="alice")``; subclasses override."""
        raise NotImplementedError("override the provider_factory fixture")

    @pytest.fixture
    def unreachable_overrides(self) -> dict[str, Any]:
        """Settings overrides that point at an unreachable remote; subclasses override."""
        raise NotImplementedError("override the unreachable_overrides fixture")

    @pytest.fixture
    def provider(self, provider_factory: MakeProvider) -> BackupProvider:
        """A provider for user ``alice`` on the shared remote."""
        return provider_factory()

    @pytest.fixture
    def other_machine(self, provider_factory: MakeProvider, tmp_path: Path) -> BackupProvider:
        """A provider for ``alice`` with its own local state, on the same remote."""
        return provider_factory({"storage_location": str(tmp_path / "other-machine")})

    # -- tests ---------------------------------------------------------------------------
    def test_restore_from_an_empty_remote_returns_false(
        self, provider: BackupProvider, tmp_path: Path
    ) -> None:
        target = tmp_path / "restore"
        target.mkdir()
        assert provider.restore(target) is False
        assert read_dir(target) == {}, "restore from an empty remote wrote files"

    def test_push_then_restore_round_trips_bytes(
        self, provider: BackupProvider, other_machine: BackupProvider, tmp_path: Path
    ) -> None:
        files = {SNAPSHOT: _jsonl("first"), "extra.bin": bytes(range(256)) * 64}
        report = provider.push(write_snapshot(tmp_path / "snap", files))
        assert isinstance(report, SyncReport)
        assert report.provider == provider.name
        assert sorted(Path(p).name for p in report.pushed) == sorted(files)
        target = tmp_path / "restore"
        target.mkdir()
        assert other_machine.restore(target) is True
        assert read_dir(target) == files

    def test_second_push_without_change_uploads_nothing(
        self, provider: BackupProvider, tmp_path: Path
    ) -> None:
        snap = write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("same")})
        assert provider.push(snap).pushed
        again = provider.push(write_snapshot(tmp_path / "snap2", {SNAPSHOT: _jsonl("same")}))
        assert again.pushed == [], f"an unchanged snapshot was uploaded again: {again}"
        assert again.skipped >= 1

    def test_unchanged_push_from_a_fresh_provider_uploads_nothing(
        self, provider: BackupProvider, other_machine: BackupProvider, tmp_path: Path
    ) -> None:
        provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("same")}))
        again = other_machine.push(write_snapshot(tmp_path / "s2", {SNAPSHOT: _jsonl("same")}))
        assert again.pushed == [], "the remote already held these bytes"

    def test_changed_snapshot_replaces_the_previous_one(
        self, provider: BackupProvider, other_machine: BackupProvider, tmp_path: Path
    ) -> None:
        provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("old")}))
        report = provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("new")}))
        assert [Path(p).name for p in report.pushed] == [SNAPSHOT]
        target = tmp_path / "restore"
        target.mkdir()
        assert other_machine.restore(target) is True
        assert read_dir(target) == {SNAPSHOT: _jsonl("new")}

    def test_two_machines_take_turns(
        self, provider: BackupProvider, other_machine: BackupProvider, tmp_path: Path
    ) -> None:
        provider.push(write_snapshot(tmp_path / "a", {SNAPSHOT: _jsonl("from a")}))
        other_machine.push(write_snapshot(tmp_path / "b", {SNAPSHOT: _jsonl("from b")}))
        provider.push(write_snapshot(tmp_path / "a", {SNAPSHOT: _jsonl("from a again")}))
        target = tmp_path / "restore"
        target.mkdir()
        assert other_machine.restore(target) is True
        assert read_dir(target) == {SNAPSHOT: _jsonl("from a again")}

    def test_users_do_not_see_each_others_snapshots(
        self, provider_factory: MakeProvider, tmp_path: Path
    ) -> None:
        alice = provider_factory(user="alice")
        bob = provider_factory({"storage_location": str(tmp_path / "bob-home")}, user="bob")
        alice.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("alice only")}))
        target = tmp_path / "restore"
        target.mkdir()
        assert bob.restore(target) is False
        assert read_dir(target) == {}

    def test_large_snapshot_round_trips(
        self, provider: BackupProvider, other_machine: BackupProvider, tmp_path: Path
    ) -> None:
        data = os.urandom(self.large_snapshot_bytes)
        provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: data}))
        again = provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: data}))
        assert again.pushed == [], "a large unchanged snapshot was uploaded again"
        target = tmp_path / "restore"
        target.mkdir()
        assert other_machine.restore(target) is True
        got = (target / SNAPSHOT).read_bytes()
        assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()

    def test_unreachable_remote_raises_backup_error_on_push(
        self,
        provider_factory: MakeProvider,
        unreachable_overrides: dict[str, Any],
        tmp_path: Path,
    ) -> None:
        broken = provider_factory(unreachable_overrides)
        with pytest.raises(BackupError) as info:
            broken.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("x")}))
        assert str(info.value).strip(), "BackupError without a message"

    def test_unreachable_remote_raises_backup_error_on_restore(
        self,
        provider_factory: MakeProvider,
        unreachable_overrides: dict[str, Any],
        tmp_path: Path,
    ) -> None:
        broken = provider_factory(unreachable_overrides)
        target = tmp_path / "restore"
        target.mkdir()
        with pytest.raises(BackupError):
            broken.restore(target)
        assert read_dir(target) == {}

    def test_close_is_safe_twice(self, provider: BackupProvider) -> None:
        provider.close()
        provider.close()

    # -- conditional writes (set ``conditional_writes = False`` for a provider without) --
    #: Whether the provider implements ``fetch`` versions and a conditional ``push_if``.
    conditional_writes: ClassVar[bool] = True

    def _needs_conditional(self) -> None:
        if not self.conditional_writes:
            pytest.skip("this provider has no conditional writes (last writer wins)")

    def test_fetch_names_a_version_and_skips_a_known_one(
        self, provider: BackupProvider, other_machine: BackupProvider, tmp_path: Path
    ) -> None:
        self._needs_conditional()
        empty = other_machine.fetch(tmp_path / "none", None)
        assert (empty.version, empty.downloaded) == (None, False)
        pushed = provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("v")}))
        first = other_machine.fetch(tmp_path / "one", None)
        assert first.downloaded and first.version
        assert read_dir(tmp_path / "one") == {SNAPSHOT: _jsonl("v")}
        assert pushed.version in (None, first.version)
        again = other_machine.fetch(tmp_path / "two", first.version)
        assert (again.version, again.downloaded) == (first.version, False)
        assert not (tmp_path / "two").exists() or read_dir(tmp_path / "two") == {}

    def test_push_if_never_overwrites_a_snapshot_pushed_since_the_fetch(
        self, provider: BackupProvider, other_machine: BackupProvider, tmp_path: Path
    ) -> None:
        from smriti.backup import SnapshotConflict

        self._needs_conditional()
        for round_, before in enumerate((None, _jsonl("base"))):
            if before is not None:
                provider.push(write_snapshot(tmp_path / "base", {SNAPSHOT: before}))
            stale = provider.fetch(tmp_path / f"stale{round_}", None)
            won = other_machine.fetch(tmp_path / f"won{round_}", None)
            theirs = _jsonl(f"theirs {round_}")
            done = other_machine.push_if(write_snapshot(tmp_path / "b", {SNAPSHOT: theirs}), won)
            assert done.pushed and done.version
            with pytest.raises(SnapshotConflict):
                provider.push_if(write_snapshot(tmp_path / "a", {SNAPSHOT: _jsonl("mine")}), stale)
            target = tmp_path / f"check{round_}"
            assert other_machine.restore(target) is True
            assert read_dir(target) == {SNAPSHOT: theirs}, "a stale push overwrote the remote"

    def test_location_names_the_remote_file_not_a_local_path(
        self, provider: BackupProvider, tmp_path: Path
    ) -> None:
        provider.push(write_snapshot(tmp_path / "snap", {SNAPSHOT: _jsonl("x")}))
        fetched = provider.fetch(tmp_path / "into", None)
        for where in (fetched.where, provider.location()):
            assert f"{provider.user}/{SNAPSHOT}" in where
            assert str(tmp_path / "into") not in where


# -- the same contract through the real Engine ---------------------------------------------
TOPICS = (
    "python programming language interpreter",
    "espresso coffee brewing grinder",
    "mountain hiking trail summit",
    "jazz music saxophone concert",
    "garden tomatoes compost watering",
    "sailing boat wind harbour",
    "chess opening endgame tactics",
    "bread baking sourdough oven",
)


def memory_texts(n: int) -> list[str]:
    """``n`` distinct memory texts in a few topics, similar enough to be associated."""
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        out.append(f"note {i}: about {topic}, detail {i % 13} and {topic.split()[i % 3]}")
    return out


class EngineBackupTests:
    """End-to-end backup tests through a real Engine (store, consolidate, sync, restore).

    Override ``backup_plugin`` (the plugin module to register), ``backup_overrides``
    (settings overrides selecting and configuring the provider),
    ``unreachable_backup_overrides`` and ``remote_snapshot`` (read or replace the
    remote's ``alice/memory.jsonl`` behind the provider's back).
    ``storage_plugin`` defaults to the Kùzu backend.
    """

    #: Memories stored by the round-trip test.
    memories: ClassVar[int] = 1000

    @pytest.fixture
    def backup_plugin(self) -> Any:
        """The backup plugin module to register; subclasses override."""
        raise NotImplementedError("override the backup_plugin fixture")

    @pytest.fixture
    def backup_overrides(self) -> dict[str, Any]:
        """Settings overrides that select and configure the provider; subclasses override."""
        raise NotImplementedError("override the backup_overrides fixture")

    @pytest.fixture
    def unreachable_backup_overrides(self, backup_overrides: dict[str, Any]) -> dict[str, Any]:
        """Overrides pointing the provider at an unreachable remote; subclasses override."""
        raise NotImplementedError("override the unreachable_backup_overrides fixture")

    @pytest.fixture
    def remote_snapshot(self) -> Any:
        """An object with ``read() -> bytes | None`` and ``write(data: bytes | None)``
        (None deletes) acting on alice's remote snapshot file; subclasses override."""
        raise NotImplementedError("override the remote_snapshot fixture")

    @pytest.fixture
    def remote_history(self) -> Any:
        """An object with ``texts() -> list[bytes]``: every copy of alice's files the
        remote keeps (every object of a git remote, every version of an S3 object), for
        the purge test; a provider without ``purge`` leaves it and the test skips."""
        pytest.skip("override the remote_history fixture to check BackupProvider.purge")

    @pytest.fixture
    def storage_plugin(self) -> Any:
        """The storage plugin module (default: Kùzu, skipped when not installed)."""
        return pytest.importorskip("smriti_backend_kuzu.plugin")

    @pytest.fixture
    def make_engine(
        self, tmp_path: Path, storage_plugin: Any, backup_plugin: Any
    ) -> Callable[..., Any]:
        """``make_engine(overrides) -> Engine`` (unopened) with both plugins registered."""
        from smriti.config import Settings
        from smriti.engine.core import Engine
        from smriti.plugins import create_plugin_manager

        def make(overrides: dict[str, Any]) -> Any:
            pm, _ = create_plugin_manager(load_entry_points=False, environ={})
            pm.register(storage_plugin)
            pm.register(backup_plugin)
            base = {
                "accessing_user": "alice",
                "storage_location": str(tmp_path / "home"),
                "consolidation_interval": 0,
                "backup_sync_interval": 0,
                "embedder": "lexical",
                "cue_extractor": "heuristic",
            }
            settings = Settings.from_env({}, **{**base, **overrides})
            return Engine.from_settings(settings, pm)

        return make

    @pytest.mark.timeout(900)  # 1,000 stores through the full pipeline on a slow machine
    def test_restore_after_losing_the_local_store_is_exact(
        self, make_engine: Callable[..., Any], backup_overrides: dict[str, Any]
    ) -> None:
        import shutil

        from smriti.portable import canonical_hash

        with make_engine(backup_overrides) as engine:
            for text in memory_texts(self.memories):
                engine.store(text, importance=0.6, tags="backup,test", source="suite")
            engine.consolidate()
            stats = engine.stats()
            report = engine.sync()
            assert report.pushed, f"the first sync pushed nothing: {report}"
            before = canonical_hash(engine)
            user_dir = engine.settings.user_dir()
        assert stats["associations"] > 0, "the test texts produced no associations"
        shutil.rmtree(user_dir)
        with make_engine(backup_overrides) as restored:
            assert restored.backend.count_engrams() == self.memories
            assert canonical_hash(restored) == before
            assert restored.stats() == stats
            assert restored.sync().pushed == [], "a freshly restored store was pushed again"
            assert restored.recall("espresso coffee grinder", limit=3)

    def test_two_syncs_without_change_upload_nothing(
        self, make_engine: Callable[..., Any], backup_overrides: dict[str, Any]
    ) -> None:
        with make_engine(backup_overrides) as engine:
            for text in memory_texts(20):
                engine.store(text)
            assert engine.sync().pushed
            assert engine.sync().pushed == []
            assert engine.sync().pushed == []
            engine.store("one more memory about sailing")
            assert engine.sync().pushed, "a changed store was not pushed"

    def test_purge_removes_a_memory_from_every_snapshot_the_remote_keeps(
        self,
        make_engine: Callable[..., Any],
        backup_overrides: dict[str, Any],
        remote_history: Any,
        remote_snapshot: Any,
    ) -> None:
        token = "Zq" + uuid.uuid4().hex[:10] + "Vx"
        with make_engine(backup_overrides) as engine:
            for text in memory_texts(8):
                engine.store(text)
            engine.sync()
            secret = engine.store(f"the vault word is {token}", tags=token.lower()).engram.id
            engine.sync()
            engine.store("a memory stored after the secret one, about kayaks")
            engine.sync()
            held = [t for t in remote_history.texts() if token.lower().encode() in t.lower()]
            assert len(held) >= 2, "the test meant two snapshots holding the token"
            done = engine.purge(secret)
            assert done["backup_purge"]["warning"]
            assert engine.backend.count_engrams() == 9
        assert [t for t in remote_history.texts() if token.lower().encode() in t.lower()] == []
        current = remote_snapshot.read()
        assert current is not None and b"kayaks" in current, "the purge lost other memories"
        with make_engine(backup_overrides) as again:  # still a valid, mergeable snapshot
            assert again.sync() is not None
            assert again.backend.count_engrams() == 9

    def test_unreachable_remote_keeps_the_engine_serving(
        self,
        make_engine: Callable[..., Any],
        unreachable_backup_overrides: dict[str, Any],
    ) -> None:
        from structlog.testing import capture_logs

        with capture_logs() as logs:
            engine = make_engine(unreachable_backup_overrides).open()
            try:
                for text in memory_texts(10):
                    engine.store(text)
                with pytest.raises(BackupError):
                    engine.sync()
                assert engine.dirty.is_set(), "a failed sync must leave the store dirty"
                assert len(engine.recall("espresso coffee", limit=20)) > 0
                assert engine.backend.count_engrams() == 10
            finally:
                engine.close()
        errors = [e for e in logs if e.get("log_level") == "error"]
        assert any("restore failed" in e["event"] for e in errors), errors
        assert any("final backup failed" in e["event"] for e in errors), errors
        with make_engine({"backup_type": "none"}) as again:
            assert again.backend.count_engrams() == 10, "local memories were lost"

    # -- several machines --------------------------------------------------------------
    @staticmethod
    def machine(make_engine: Callable[..., Any], overrides: dict[str, Any], home: Path) -> Any:
        """An opened engine for alice with its own store (another machine)."""
        return make_engine({**overrides, "storage_location": str(home)}).open()

    def test_a_stale_machine_merges_instead_of_overwriting(
        self, make_engine: Callable[..., Any], backup_overrides: dict[str, Any], tmp_path: Path
    ) -> None:
        texts = memory_texts(70)
        one = self.machine(make_engine, backup_overrides, tmp_path / "m1")
        try:
            for text in texts[:50]:
                one.store(text)
            one.sync()
            with self.machine(make_engine, backup_overrides, tmp_path / "m2") as two:
                assert two.backend.count_engrams() == 50
                for text in texts[50:60]:
                    two.store(text)
                assert two.sync().pushed
            for text in texts[60:]:
                one.store(text)  # stale: has not seen machine 2's ten
            assert one.sync().pushed
            assert one.backend.count_engrams() == 70, "machine 2's memories were not merged"
        finally:
            one.close()
        with self.machine(make_engine, backup_overrides, tmp_path / "fresh") as fresh:
            assert fresh.backend.count_engrams() == 70
            assert {e.content for e in fresh.backend.iter_engrams()} == set(texts)

    def test_three_machines_converge_to_the_union_minus_the_forgets(
        self, make_engine: Callable[..., Any], backup_overrides: dict[str, Any], tmp_path: Path
    ) -> None:
        from smriti.portable import canonical_hash
        from smriti.portable.tombstones import load

        texts = iter(memory_texts(40))
        kept: set[str] = set()
        gone: set[str] = set()

        def store(engine: Any, n: int) -> list[str]:
            ids = [engine.store(next(texts)).engram.id for _ in range(n)]
            kept.update(ids)
            return ids

        def forget(engine: Any, memory_id: str) -> None:
            engine.forget(memory_id)
            kept.discard(memory_id)
            gone.add(memory_id)

        machines = [
            self.machine(make_engine, backup_overrides, tmp_path / f"m{i}") for i in range(3)
        ]
        a, b, c = machines
        try:
            first = store(a, 6)
            a.sync()
            store(b, 3)  # b started empty while a's first sync had not happened: no restore
            forget(b, store(b, 1)[0])
            b.sync()  # merges a's six
            forget(a, first[0])  # a has not seen b's snapshot yet
            store(a, 2)
            store(c, 2)
            c.sync()
            a.sync()
            forget(c, first[1])  # c holds a's memories since its sync
            b.recall("espresso coffee grinder")  # access updates: newer versions on b
            c.recall("espresso coffee grinder")
            b.sync()
            c.sync()
            for engine in (a, b, c, a, b):  # a final round: everyone has seen everyone
                engine.sync()
            hashes = {canonical_hash(m) for m in machines}
            ids = [{e.id for e in m.backend.iter_engrams()} for m in machines]
            stones = [set(load(m.backend)) for m in machines]
        finally:
            for m in machines:
                m.close()
        assert ids == [kept] * 3, "a machine lost a memory or kept a forgotten one"
        assert stones == [gone] * 3
        assert len(hashes) == 1, "the machines did not converge to one graph"
        with self.machine(make_engine, backup_overrides, tmp_path / "fresh") as fresh:
            assert {e.id for e in fresh.backend.iter_engrams()} == kept
            assert {canonical_hash(fresh)} == hashes
            assert fresh.sync().pushed == [], "a converged store was pushed again"

    @pytest.mark.parametrize(
        "bad",
        [
            b"this is not json\n",
            b'{"kind": "header", "format": "smriti-export", "version": 1, "user": "alice"}\n'
            b'{"kind": "engram", "id": "x"}\n',
            b'{"kind": "header", "format": "smriti-export", "version": 1, "user": "mallory"}\n'
            b'{"kind": "trailer", "counts": {}}\n',
        ],
        ids=["not-an-export", "truncated", "another-users"],
    )
    def test_a_bad_remote_snapshot_is_reported_and_never_overwritten(
        self,
        make_engine: Callable[..., Any],
        backup_overrides: dict[str, Any],
        remote_snapshot: Any,
        tmp_path: Path,
        bad: bytes,
    ) -> None:
        from structlog.testing import capture_logs

        with self.machine(make_engine, backup_overrides, tmp_path / "m1") as one:
            for text in memory_texts(4):
                one.store(text)
            one.sync()
            remote_snapshot.write(bad)
            one.store("one more memory after the remote went bad")
            for _ in range(2):  # the second sync must not say "nothing to push"
                with pytest.raises(BackupError) as info:
                    one.sync()
                message = str(info.value)
                assert f"alice/{SNAPSHOT}" in message and one.backup.location() in message
                assert "smriti-sync-" not in message and "smriti-restore-" not in message
                assert "remove it from the remote" in message
                assert remote_snapshot.read() == bad, "the bad snapshot was overwritten"
            with capture_logs() as logs:
                other = self.machine(make_engine, backup_overrides, tmp_path / "m2")
            try:
                assert other.backend.count_engrams() == 0
                assert any("restore failed" in e["event"] for e in logs), logs
                with pytest.raises(BackupError):
                    other.sync()
            finally:
                other.close()
            assert remote_snapshot.read() == bad
            remote_snapshot.write(None)  # a person decided: remove the file
            assert one.sync().pushed
        with self.machine(make_engine, backup_overrides, tmp_path / "fresh") as fresh:
            assert fresh.backend.count_engrams() == 5

    def test_a_push_that_loses_a_race_merges_and_retries(
        self, make_engine: Callable[..., Any], backup_overrides: dict[str, Any], tmp_path: Path
    ) -> None:
        one = self.machine(make_engine, backup_overrides, tmp_path / "m1")
        two = self.machine(make_engine, backup_overrides, tmp_path / "m2")
        try:
            mine = {one.store(t).engram.id for t in memory_texts(6)[:3]}
            theirs = {two.store(t).engram.id for t in memory_texts(6)[3:]}
            real = one.backup.push_if
            calls: list[int] = []

            def racing(snapshot: Path, fetched: Any) -> SyncReport:
                calls.append(1)
                if len(calls) == 1:  # machine 2 pushes between machine 1's fetch and push
                    assert two.sync().pushed
                return real(snapshot, fetched)

            one.backup.push_if = racing  # type: ignore[method-assign]
            assert one.sync().pushed
            assert len(calls) == 2, "the lost push was not retried after a merge"
            assert {e.id for e in one.backend.iter_engrams()} == mine | theirs
        finally:
            one.close()
            two.close()
        with self.machine(make_engine, backup_overrides, tmp_path / "fresh") as fresh:
            assert {e.id for e in fresh.backend.iter_engrams()} == mine | theirs
