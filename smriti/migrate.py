"""``smriti migrate --to ENGINE``: copy a store to another embedded engine, losslessly.

Two embedded engines may be unable to share a Python process (``kuzu`` and ``ladybug``
cannot), so this process imports neither: a child process with the source engine
exports the store (the portable JSONL format, ``smriti.portable``) and prints the
store's canonical hash; a second child with the target engine imports the file into a
new store in a scratch folder beside the old one and prints its hash. Only when the two
hashes are equal are the new store's files renamed into the user's directory and the
engine recorded (``smriti.store_engine``); the old files stay until the user removes
them. An interrupted move leaves the scratch folder, which the next run removes before
it starts again; the old store is never written.

Run it as a module (``python -m smriti.migrate export|import FILE``) to be such a child:
it opens the ``DB_TYPE`` backend of the environment's settings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import BackendError, ConfigError
from smriti.logs import get_logger
from smriti.private import private_dir
from smriti.store_engine import AUTO, MOVING_MARKER, backend_class, write_engine_record

if TYPE_CHECKING:
    from smriti.backend import StorageBackend
    from smriti.config import Settings
    from smriti.plugins import Registry

log = get_logger(__name__)

#: The scratch folder in the user's directory: ``migrate-{target}``.
SCRATCH_PREFIX = "migrate-"
#: A child's whole run (export or import of a large store) may take this long.
CHILD_TIMEOUT = 6 * 3600


@dataclass(slots=True)
class MigrationReport:
    """What a move did: engines, counts, the equal hashes, the files kept."""

    user: str
    source: str
    target: str
    counts: dict[str, int]
    canonical_hash: str
    seconds: float
    old_files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``smriti migrate --json``)."""
        return asdict(self)


def migrate(settings: Settings, registry: Registry, target: str) -> MigrationReport:
    """Move ``settings``' user's store to the backend ``target`` (see the module)."""
    began = time.monotonic()
    user = settings.accessing_user
    user_dir = settings.user_dir(user)
    source_cls = backend_class(registry, settings, user)
    target_cls = registry.get("backend", target, "--to")
    _check_engines(source_cls, target_cls, user_dir)
    scratch = user_dir / f"{SCRATCH_PREFIX}{target_cls.name}"
    _clear(scratch)
    _check_target_free(target_cls, user_dir)
    private_dir(scratch / user)
    export = scratch / "export.jsonl"
    env = _child_env(settings, scratch)
    before = _child("export", export, {**env, "DB_TYPE": source_cls.name})
    after = _child("import", export, {**env, "DB_TYPE": target_cls.name,
                                      "STORAGE_LOCATION": str(scratch)})  # fmt: skip
    if after["hash"] != before["hash"]:
        raise BackendError(
            f"the copy of {user!r}'s store in {target_cls.name} differs from the original "
            f"(canonical hash {after['hash'][:12]} != {before['hash'][:12]}); nothing was "
            f"changed, the copy is left in {scratch} for a bug report"
        )
    _swap_in(scratch / user, user_dir, target_cls)
    shutil.rmtree(scratch, ignore_errors=True)
    old = sorted(p.name for n in source_cls.store_files for p in user_dir.glob(n + "*"))
    report = MigrationReport(user, source_cls.name, target_cls.name, before["counts"],
                             after["hash"], time.monotonic() - began, old)  # fmt: skip
    log.info("store moved", **{k: v for k, v in report.as_dict().items() if k != "old_files"})
    return report


def _check_engines(
    source: type[StorageBackend], target: type[StorageBackend], user_dir: Path
) -> None:
    if source is target:
        raise ConfigError(f"the store in {user_dir} already uses {target.name}: nothing to move")
    for cls, role in ((source, "source"), (target, "target")):
        if not cls.store_files:
            raise ConfigError(
                f"{cls.name} keeps no store in {user_dir} ({role}): smriti migrate moves "
                "a store between embedded engines; use smriti export and smriti import"
            )
    if not any((user_dir / n).exists() for n in source.store_files):
        raise ConfigError(f"there is no {source.name} store in {user_dir} to move")


def _check_target_free(target: type[StorageBackend], user_dir: Path) -> None:
    """Refuse to replace a store of the target engine that no interrupted move left."""
    if (user_dir / MOVING_MARKER.format(name=target.name)).exists():
        return  # the target's files there are a cut-short move's own: replaced
    taken = [n for n in target.store_files if (user_dir / n).exists()]
    if taken:
        raise ConfigError(
            f"{user_dir} already holds a {target.name} store ({', '.join(taken)}); move it "
            "aside (or use it with DB_TYPE) before moving this store there"
        )


def _clear(scratch: Path) -> None:
    if scratch.exists():
        log.warning("removing what an interrupted move left", path=str(scratch))
        shutil.rmtree(scratch)


def _child_env(settings: Settings, scratch: Path) -> dict[str, str]:
    """The children's environment: this run's settings, no owner (each child opens
    the store itself, and the old store's owner must not be running)."""
    env = dict(settings.env or os.environ)
    env.update(
        ACCESSING_USER=settings.accessing_user,
        STORAGE_LOCATION=os.fspath(settings.storage_location.expanduser().resolve()),
        SMRITI_OWNER="off",
        LOG_LEVEL="warning" if settings.log_level == "info" else settings.log_level,
    )
    return env


def _child(mode: str, export: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run ``python -m smriti.migrate mode export`` and return the JSON it prints."""
    done = subprocess.run(
        [sys.executable, "-m", "smriti.migrate", mode, str(export)],
        env=env, stdout=subprocess.PIPE, text=True, timeout=CHILD_TIMEOUT,
    )  # fmt: skip
    if done.returncode != 0:
        engine = env["DB_TYPE"]
        raise BackendError(
            f"the {mode} with {engine} failed (exit {done.returncode}; its error is above). "
            "Nothing was changed. If the store is in use, stop the servers using it and its "
            "owner (smriti owner stop) and run smriti migrate again"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _swap_in(built: Path, user_dir: Path, target: type[StorageBackend]) -> None:
    """Rename the new store's files into ``user_dir``, then record the engine."""
    moving = user_dir / MOVING_MARKER.format(name=target.name)
    moving.write_text("a move renames its files into place\n", encoding="utf-8")
    for path in sorted(built.iterdir()):
        if any(path.name.startswith(n) for n in target.store_files):
            os.replace(path, user_dir / path.name)
    # The working set's snapshot was saved from the old store; the new one saves its own.
    shutil.rmtree(user_dir / "working-set", ignore_errors=True)
    write_engine_record(user_dir, target.name)
    moving.unlink()


def run_child(mode: str, export: Path) -> dict[str, Any]:
    """As a child: open the ``DB_TYPE`` backend, export to or import from ``export``,
    and return the store's canonical hash and counts."""
    from smriti.config import Settings
    from smriti.plugins import Registry, create_plugin_manager
    from smriti.portable import canonical_hash, export_store, import_store

    settings = Settings.from_env()
    if settings.db_type == AUTO:
        raise ConfigError("a migrate child needs an explicit DB_TYPE")
    pm, _ = create_plugin_manager()
    cls = Registry(pm).get("backend", settings.db_type, "DB_TYPE")
    backend = cls.from_settings(settings, settings.accessing_user)
    backend.open()
    try:
        if mode == "export":
            export_store(backend, export)
        else:
            import_store(backend, export)
        return {"hash": canonical_hash(backend), "counts": backend.counts()}
    finally:
        backend.close()


def main(argv: list[str]) -> int:
    """``python -m smriti.migrate export|import FILE``: one child of ``migrate``."""
    from smriti.logs import configure_logging

    configure_logging(os.environ.get("LOG_LEVEL", "warning"))
    if len(argv) != 2 or argv[0] not in ("export", "import"):
        print("usage: python -m smriti.migrate export|import FILE", file=sys.stderr)
        return 2
    try:
        result = run_child(argv[0], Path(argv[1]))
    except Exception as exc:  # the parent reports it; stderr is the user's
        print(f"smriti migrate: {argv[0]} failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
