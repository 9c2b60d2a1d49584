"""``smriti migrate``: a Kùzu store moves to LadybugDB (and back) with everything, each
engine in a child process, checked by the canonical hash; interrupted moves re-run.

Everything runs the real console script: this test process holds Kùzu and must never
import LadybugDB, so no store is opened here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from smriti.testing.owner_load import cli, load_env

USER = "mover"


def _ok(env: dict[str, str], *args: str) -> str:
    done = cli(env, *args)
    assert done.returncode == 0, f"smriti {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


def _hash(env: dict[str, str], **extra: str) -> dict[str, object]:
    return json.loads(_ok({**env, **extra}, "hash", "--json"))


@pytest.fixture
def kuzu_store(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A Kùzu store with versions, associations, clusters and access statistics."""
    env = load_env(tmp_path / "store", USER, SMRITI_OWNER="off")
    kuzu = {**env, "DB_TYPE": "kuzu"}
    ids = []
    for text in (
        "Alice drinks green tea every morning",
        "Alice's green tea comes from a shop in Kyoto",
        "The quarterly report is due on Friday",
        "Bob's cat Miso sleeps on the report",
    ):
        ids.append(json.loads(_ok(kuzu, "store", text, "--tags", "t1,t2", "--json"))["id"])
    _ok(kuzu, "correct", ids[2], "The quarterly report is due on Thursday")
    _ok(kuzu, "recall", "green tea")  # access statistics
    _ok(kuzu, "consolidate")  # clusters and associations
    return env, tmp_path / "store" / USER


def test_a_kuzu_store_moves_to_ladybug_with_everything(
    kuzu_store: tuple[dict[str, str], Path],
) -> None:
    env, user_dir = kuzu_store
    before = _hash(env, DB_TYPE="kuzu")
    assert before["engrams"] == 5 and before["associations"]  # 4 + the old version
    assert _hash(env) == before  # DB_TYPE=auto keeps the store on Kùzu
    report = json.loads(_ok(env, "migrate", "--to", "ladybug", "--json"))
    assert (report["source"], report["target"]) == ("kuzu", "ladybug")
    assert report["canonical_hash"] == before["canonical_hash"]
    assert "memory.kuzu" in report["old_files"]
    assert (user_dir / "memory.kuzu").exists() and (user_dir / "memory.lbug").exists()
    assert not list(user_dir.glob("migrate-*"))
    assert _hash(env) == before  # auto now opens the moved store: LadybugDB
    assert _hash(env, DB_TYPE="ladybug") == before
    doctor = _ok(env, "doctor")
    assert "ladybug" in doctor and "moved from kuzu" in doctor
    # and back: the old Kùzu files must be moved aside first
    refused = cli(env, "migrate", "--to", "kuzu")
    assert refused.returncode == 2 and "move it aside" in refused.stderr
    for path in user_dir.glob("memory.kuzu*"):
        path.unlink()
    _ok(env, "migrate", "--to", "kuzu")
    assert _hash(env) == before and _hash(env, DB_TYPE="kuzu") == before


def test_an_interrupted_move_runs_again(kuzu_store: tuple[dict[str, str], Path]) -> None:
    env, user_dir = kuzu_store
    before = _hash(env, DB_TYPE="kuzu")
    # cut short while the copy was being built: a scratch folder, the old store untouched
    scratch = user_dir / "migrate-ladybug"
    (scratch / USER).mkdir(parents=True)
    (scratch / "export.jsonl").write_text('{"kind": "header"')
    # cut short while the files were renamed into place: a partial new file, the marker
    (user_dir / "memory.lbug").write_bytes(b"\0" * 4096)
    (user_dir / "migrate-ladybug.moving").write_text("")
    assert _hash(env) == before  # no record yet: the store still opens with Kùzu
    _ok(env, "migrate", "--to", "ladybug")
    assert not scratch.exists() and not (user_dir / "migrate-ladybug.moving").exists()
    assert _hash(env) == before
    assert json.loads((user_dir / "engine.json").read_text()) == {"db_type": "ladybug"}


def test_a_store_of_the_target_engine_is_never_replaced(
    kuzu_store: tuple[dict[str, str], Path],
) -> None:
    env, user_dir = kuzu_store
    (user_dir / "memory.lbug").write_bytes(b"someone's store")
    refused = cli({**env, "DB_TYPE": "kuzu"}, "migrate", "--to", "ladybug")
    assert refused.returncode == 2 and "already holds a ladybug store" in refused.stderr
    assert (user_dir / "memory.lbug").read_bytes() == b"someone's store"


def test_a_kuzu_store_without_kuzu_names_the_move(
    kuzu_store: tuple[dict[str, str], Path],
) -> None:
    """Where Kùzu does not install (macOS or Windows on Python 3.14), the store is not
    opened as a new empty LadybugDB store: the error says how to move it."""
    env, user_dir = kuzu_store
    without = {**env, "SMRITI_DISABLE_PLUGINS": "smriti-backend-kuzu"}
    done = cli(without, "recall", "tea")
    assert done.returncode == 1
    assert "smriti migrate --to ladybug" in done.stderr and "uvx --python 3.13" in done.stderr
    assert not (user_dir / "memory.lbug").exists()
    assert cli(without, "migrate", "--to", "ladybug").returncode == 2  # kuzu not installed


def test_migrate_to_an_unknown_or_same_engine_is_refused(
    kuzu_store: tuple[dict[str, str], Path],
) -> None:
    env, _ = kuzu_store
    same = cli(env, "migrate", "--to", "kuzu")
    assert same.returncode == 2 and "already uses kuzu" in same.stderr
    unknown = cli(env, "migrate", "--to", "nosuch")
    assert unknown.returncode == 2 and "--to='nosuch' is not installed" in unknown.stderr
