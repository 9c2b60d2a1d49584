"""Private on disk, and one person one store, through the real ``smriti`` command.

Stores are made under umask 022 (the usual one, which leaves new files readable by
everyone), then every path is checked by mode and by reading it as another uid (65534,
``nobody``). The tests run as root, which may switch to that uid; a control file that is
world-readable proves the other uid can read what it should.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smriti.auth.keys import KeyStore
from smriti.config import ConfigError
from smriti.private import make_private, open_private, private_dir, tighten
from smriti.store_dir import prepare_store

NOBODY = 65534
#: A Python the other uid can run (the test venv's lives under /root).
SYSTEM_PYTHON = "/usr/bin/python3"
PROBE = """
import json, os, sys
out = {}
for path in json.load(sys.stdin):
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.listdir(path)
        else:
            with open(path, "rb") as fh:
                fh.read(1)
        out[path] = "read"
    except PermissionError:
        out[path] = "denied"
    except OSError as exc:
        out[path] = f"error {exc.errno}"
print(json.dumps(out))
"""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not Path(SYSTEM_PYTHON).exists(),
    reason="reading as another uid needs root and a system python3",
)


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory other users may enter (pytest's tmp_path is 0700 under root, which
    would deny the other uid everything and prove nothing)."""
    path = Path(tempfile.mkdtemp(prefix="smriti-private-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def env(base: Path) -> dict[str, str]:
    remote = base / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(remote)], check=True)
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k not in {"ACCESSING_USER", "DB_TYPE", "LOG_LEVEL"}
    }
    clean.update(
        STORAGE_LOCATION=str(base / "store"),
        ACCESSING_USER="alice",
        HOME=str(base / "home"),
        BACKUP_TYPE="git",
        GIT_BASE_URL=str(remote),
        BACKUP_SYNC_INTERVAL="0",
        HF_HUB_OFFLINE="1",
    )
    return clean


def smriti(env: dict[str, str], *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """The console script under umask 022, as a user's shell usually runs it."""
    return subprocess.run(
        [sys.executable, "-m", "smriti", *args],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=120,
        umask=0o022,
    )


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def records(stderr: str, event_part: str) -> list[dict[str, Any]]:
    """The JSON log records on ``stderr`` whose event contains ``event_part``."""
    found = []
    for line in stderr.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and event_part in str(record.get("event")):
            found.append(record)
    return found


def as_nobody(paths: list[Path]) -> dict[str, str]:
    """What uid 65534 gets when it reads each path: ``read``, ``denied`` or an error."""
    result = subprocess.run(
        [SYSTEM_PYTHON, "-c", PROBE],
        input=json.dumps([str(p) for p in paths]),
        capture_output=True,
        text=True,
        timeout=60,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def tree(root: Path) -> list[Path]:
    return [root, *sorted(root.rglob("*"))]


def loosen(root: Path) -> int:
    """What an older version left under umask 022: 0755 directories, 0644 files."""
    count = 0
    for path in tree(root):
        if path.is_symlink():
            continue
        path.chmod(0o755 if path.is_dir() else 0o644)
        count += 1
    return count


@needs_root
def test_a_store_made_under_umask_022_is_private_to_its_owner(
    env: dict[str, str], base: Path
) -> None:
    ok(smriti(env, "store", "The vault code is in the blue notebook", "--json"))
    # Before any other command opens (and so tightens) the store: what the owner
    # process and Kùzu created under it is private from the start.
    running = tree(base / "store")
    assert len(running) > 5 and base / "store" / "alice" / "memory.lbug" in running
    assert all(mode(p) & 0o077 == 0 for p in running), [(p, oct(mode(p))) for p in running]
    ok(smriti(env, "store", "Ravi's cat is called Biscuit", "--tags", "pets", "--json"))
    ok(smriti(env, "sync", "--json"))
    ok(smriti(env, "export", str(base / "export.jsonl")))
    ok(smriti(env, "graph", str(base / "graph.html")))
    status = ok(smriti(env, "owner", "status", "--json"))
    assert json.loads(status.stdout)["running"], "the store is reached through its owner"
    ok(smriti(env, "owner", "stop"))

    store = base / "store"
    paths = tree(store)
    user_dir = store / "alice"
    names = {p.relative_to(user_dir).as_posix() for p in paths if user_dir in p.parents}
    for made in ("memory.lbug", "memory.lbug.journal", "owner.log", "working-set/meta.json",
                 "backup-git/.git/config", "backup-git/alice/memory.jsonl"):  # fmt: skip
        assert made in names, sorted(names)
    for path in paths:
        if path.is_dir():
            assert mode(path) == 0o700, path
        elif ".git/objects/" in path.as_posix() or ".git/hooks/" in path.as_posix():
            assert mode(path) & 0o077 == 0, (path, oct(mode(path)))  # git's 0444 / 0755
        else:
            assert mode(path) == 0o600, (path, oct(mode(path)))
    for written in (base / "export.jsonl", base / "graph.html"):
        assert mode(written) == 0o600, written

    control = base / "control.txt"
    control.write_text("anyone may read this")
    control.chmod(0o644)
    seen = as_nobody([control, *paths, base / "export.jsonl", base / "graph.html"])
    assert seen.pop(str(control)) == "read", "the probe must be able to read an open file"
    assert set(seen.values()) == {"denied"}, {p: v for p, v in seen.items() if v != "denied"}


@needs_root
def test_an_existing_loose_store_is_tightened_on_open_with_one_log_line(
    env: dict[str, str], base: Path
) -> None:
    ok(smriti(env, "store", "Standup moved to 9:30", "--json"))
    ok(smriti(env, "owner", "stop"))
    store, user_dir = base / "store", base / "store" / "alice"
    store.chmod(0o755)
    loosened = loosen(user_dir)
    assert as_nobody([user_dir / "memory.lbug"])[str(user_dir / "memory.lbug")] == "read"

    result = ok(smriti(env, "recall", "standup", "--json", SMRITI_OWNER="off"))
    assert json.loads(result.stdout)["results"], "the tightened store still answers"
    lines = records(result.stderr, "made private")
    assert [r["path"] for r in lines] == [str(store), str(user_dir)], result.stderr
    assert lines[1]["changed"] == loosened
    assert all(mode(p) & 0o077 == 0 for p in tree(store)), [
        (p, oct(mode(p))) for p in tree(store) if mode(p) & 0o077
    ]
    seen = as_nobody(tree(store))
    assert set(seen.values()) == {"denied"}, seen

    again = ok(smriti(env, "stats", "--json", SMRITI_OWNER="off"))
    assert not records(again.stderr, "made private"), "nothing left to tighten, nothing said"


def test_doctor_reports_a_loose_store_and_then_a_private_one(
    env: dict[str, str], base: Path
) -> None:
    fresh = ok(smriti(env, "doctor", "--json"))
    privacy = {c["name"]: c for c in json.loads(fresh.stdout)["checks"]}["privacy"]
    assert privacy["status"] == "ok" and "nothing written yet" in privacy["detail"]

    ok(smriti(env, "store", "Doctor looks at modes", "--json", SMRITI_OWNER="off"))
    user_dir = base / "store" / "alice"
    (user_dir / "memory.lbug").chmod(0o644)
    user_dir.chmod(0o755)
    loose = ok(smriti(env, "doctor", "--json"))
    privacy = {c["name"]: c for c in json.loads(loose.stdout)["checks"]}["privacy"]
    assert privacy["status"] == "warn", privacy
    assert privacy["detail"].startswith("loose: 2 paths"), privacy
    assert f"{user_dir} (0755)" in privacy["detail"]
    assert f"{user_dir / 'memory.lbug'} (0644)" in privacy["detail"]
    assert "chmod -R go=" in privacy["fix"]
    assert mode(user_dir) == 0o755, "doctor only looks"

    ok(smriti(env, "stats", "--json", SMRITI_OWNER="off"))
    tight = ok(smriti(env, "doctor", "--json"))
    privacy = {c["name"]: c for c in json.loads(tight.stdout)["checks"]}["privacy"]
    assert privacy["status"] == "ok" and "is private" in privacy["detail"], privacy


def test_a_loose_file_at_the_top_has_the_whole_store_tightened(tmp_path: Path) -> None:
    user_dir = private_dir(tmp_path / "store" / "erin")
    deep = private_dir(user_dir / "backup-git" / ".git") / "config"
    deep.write_text("[core]")
    wal = user_dir / "memory.kuzu.wal"
    wal.write_text("made by a library process under umask 022")
    for path in (deep, wal):
        path.chmod(0o644)
    assert prepare_store(tmp_path / "store", "Erin") == user_dir
    assert mode(wal) == mode(deep) == 0o600


def test_helpers_ignore_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        made = private_dir(tmp_path / "a" / "b" / "c")
        with open_private(made / "f.bin", "wb") as fh:
            fh.write(b"x")
        existing = made / "old.txt"
        existing.write_text("kept")
        existing.chmod(0o644)
        with open_private(existing, "a", encoding="utf-8") as fh:
            fh.write(" and appended")
        make_private(made / "picture.html")
    finally:
        os.umask(old)
    assert [mode(tmp_path / p) for p in ("a", "a/b", "a/b/c")] == [0o700] * 3
    assert mode(made / "f.bin") == mode(existing) == mode(made / "picture.html") == 0o600
    assert existing.read_text() == "kept and appended"
    link = made / "link"
    link.symlink_to("/etc/passwd")
    before = mode(Path("/etc/passwd"))
    (made / "g").write_text("g")
    (made / "g").chmod(0o664)
    assert tighten(tmp_path / "a") == [made / "g"]
    assert mode(Path("/etc/passwd")) == before, "a symlink is never followed"


# -- one person, one store -----------------------------------------------------------------


def test_a_mixed_case_name_uses_the_one_lower_case_store(env: dict[str, str], base: Path) -> None:
    ok(smriti(env, "store", "Bob plays the oboe", "--json", ACCESSING_USER="Bob"))
    found = ok(smriti(env, "--user", "BOB", "recall", "oboe", "--json"))
    assert [r["content"] for r in json.loads(found.stdout)["results"]] == ["Bob plays the oboe"]
    ok(smriti(env, "owner", "stop", ACCESSING_USER="bob"))
    assert sorted(p.name for p in (base / "store").iterdir()) == ["bob"]


def test_a_store_made_under_a_mixed_case_name_is_adopted_once(
    env: dict[str, str], base: Path
) -> None:
    ok(smriti(env, "store", "Alice's flight is on Tuesday", "--json"))
    ok(smriti(env, "owner", "stop"))
    store = base / "store"
    (store / "alice").rename(store / "Alice")  # as an older version named it

    moved = ok(smriti(env, "recall", "flight", "--json", ACCESSING_USER="Alice"))
    assert [r["content"] for r in json.loads(moved.stdout)["results"]] == [
        "Alice's flight is on Tuesday"
    ]
    lines = records(moved.stderr, "canonical spelling")
    assert len(lines) == 1 and lines[0]["old"] == str(store / "Alice"), moved.stderr
    assert lines[0]["new"] == str(store / "alice")
    assert sorted(p.name for p in store.iterdir()) == ["alice"]
    again = ok(smriti(env, "stats", "--json"))
    assert json.loads(again.stdout)["engrams"] == 1
    assert not records(again.stderr, "canonical spelling")
    ok(smriti(env, "owner", "stop"))


def test_two_spellings_with_stores_are_refused_naming_both(env: dict[str, str], base: Path) -> None:
    ok(smriti(env, "store", "kept in the lower-case store", "--json"))
    ok(smriti(env, "owner", "stop"))
    store = base / "store"
    shutil.copytree(store / "alice", store / "ALICE")
    result = smriti(env, "store", "must not be stored", "--json", ACCESSING_USER="Alice")
    assert result.returncode == 2, result.stdout + result.stderr
    error = [ln for ln in result.stderr.splitlines() if ln.startswith("smriti: error:")]
    assert len(error) == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(store / "ALICE") in error[0] and str(store / "alice") in error[0]
    doctor = smriti(env, "doctor", "--json")  # exits 1: a failed check
    name = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["store name"]
    assert name["status"] == "fail" and str(store / "ALICE") in name["detail"]
    assert sorted(p.name for p in store.iterdir()) == ["ALICE", "alice"], "nothing moved"


def test_a_store_an_old_owner_still_serves_is_not_moved(tmp_path: Path) -> None:
    legacy = tmp_path / "Carol"
    legacy.mkdir()
    fd = os.open(legacy / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(ConfigError, match="an owner process still serves"):
            prepare_store(tmp_path, "carol")
    finally:
        os.close(fd)
    assert prepare_store(tmp_path, "CAROL") == tmp_path / "carol"
    assert (tmp_path / "carol" / "owner.lock").exists() and not legacy.exists()


def test_api_keys_name_the_canonical_user(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys" / ".api-keys.json")
    token = keys.create("Dana")
    key = keys.check(token)
    assert not isinstance(key, str) and key.user == "dana"
    assert mode(tmp_path / "keys") == 0o700 and mode(keys.path) == 0o600
    data = json.loads(keys.path.read_text())
    data["keys"][0]["user"] = "DANA"  # a key file written before names were case-folded
    keys.path.write_text(json.dumps(data))
    again = KeyStore(keys.path).check(token)
    assert not isinstance(again, str) and again.user == "dana"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_http_callers_whose_names_differ_in_case_share_one_store(tmp_path: Path) -> None:
    from smriti.testing.http_users import HttpServer, client, user_env

    storage = tmp_path / "store"
    keys = KeyStore(storage / ".api-keys.json")
    first, second = keys.create("Erin"), keys.create("erin")
    data = json.loads(keys.path.read_text())
    data["keys"][1]["user"] = "ERIN"  # as a key file written before names were folded
    keys.path.write_text(json.dumps(data))
    env = user_env(
        os.environ, storage, DB_TYPE="kuzu", HOME=str(tmp_path), SMRITI_AUTH="keys",
        SMRITI_OWNER="off",
    )  # fmt: skip
    with HttpServer(env, tmp_path / "server.log") as server:
        async with client(server.url, first) as session:
            done = await session.call_tool("smriti_store", {"content": "Erin parks in bay 4"})
            assert not done.is_error, done
        async with client(server.url, second) as session:
            listed = await session.call_tool("smriti_recall", {"mode": "list", "limit": 5})
            found = [r["content"] for r in listed.structured_content["results"]]
        log = server.text()
    assert found == ["Erin parks in bay 4"], log[-2000:]
    assert sorted(p.name for p in storage.iterdir() if p.is_dir()) == ["erin"]
    assert log.count("user memory opened") == 1, log[-2000:]
