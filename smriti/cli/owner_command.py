"""``smriti owner``: the process that owns an embedded store for all of a user's
processes (see ``smriti.owner``).

``smriti owner status`` shows it and the processes attached; ``smriti owner stop`` asks
it to stop (the next ``smriti`` process starts a new one); ``smriti owner run`` runs one
in the foreground, which is what every ``smriti`` process starts on demand.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from smriti.cli import output
from smriti.cli.commands import load_settings

STOP_WAIT_SECONDS = 60.0


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti owner`` on the subcommand parser ``sub``."""
    p = sub.add_parser(
        "owner",
        parents=[common],
        help="the process that owns your embedded store: status, stop, run",
        description="Every smriti process of a user (MCP servers, CLI commands) reaches "
        "an embedded store through one owner process, started on demand and stopping "
        "after SMRITI_OWNER_IDLE seconds with nobody attached.",
    )
    actions = p.add_subparsers(dest="owner_action", metavar="ACTION", required=True)
    status = actions.add_parser("status", help="the owner and the processes attached")
    status.add_argument("--json", action="store_true", help="print JSON for scripts")
    status.set_defaults(handler=status_command)
    stop = actions.add_parser("stop", help="ask the owner to stop")
    stop.add_argument("--json", action="store_true", help="print JSON for scripts")
    stop.set_defaults(handler=stop_command)
    run = actions.add_parser("run", help="run the owner in the foreground")
    run.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    run.set_defaults(handler=run_command)


def _supported() -> None:
    from smriti.errors import ConfigError
    from smriti.owner.service import owner_supported

    if not owner_supported():
        raise ConfigError("owner processes need Unix sockets, which this platform lacks")


def _existing(args: argparse.Namespace, kind: str) -> Any:
    _supported()
    from smriti.logs import configure_logging
    from smriti.owner.client import RemoteService

    settings = load_settings(args)
    configure_logging("warning")
    return settings, RemoteService.existing(settings, kind)


def status_command(args: argparse.Namespace) -> int:
    """Print the owner's status, or that none runs."""
    settings, service = _existing(args, "cli owner status")
    if service is None:
        data: dict[str, Any] = {"running": False, "store": str(settings.user_dir())}
    else:
        with service:
            data = {"running": True, **service.owner_status()}
    output.emit(data, args.json, _format_status)
    return 0


def stop_command(args: argparse.Namespace) -> int:
    """Stop the owner and wait until it has closed the store."""
    from smriti.owner.paths import OwnerPaths

    settings, service = _existing(args, "cli owner stop")
    if service is None:
        data: dict[str, Any] = {"stopped": False, "message": "no owner process is running"}
    else:
        with service:
            pid = service.owner_status()["pid"]
            service.stop_owner()
        closed = wait_unlocked(OwnerPaths.for_store(settings.user_dir()).lock)
        data = {"stopped": closed, "pid": pid}
        data["message"] = (
            f"owner process {pid} stopped" if closed else f"owner process {pid} is still closing"
        )
    output.emit(data, args.json, lambda d: d["message"])
    return 0


def run_command(args: argparse.Namespace) -> int:
    """Be the owner until stopped; startup errors go to the ready pipe as well."""
    _supported()
    from smriti.logs import configure_logging
    from smriti.owner.server import OwnerServer

    settings = load_settings(args)
    _check_needed(settings)
    owner = OwnerServer(settings)
    configure_logging(settings.log_level, relay=owner.notice)
    fd = args.ready_fd

    def ready(line: str) -> None:
        nonlocal fd
        if fd is None:
            return
        try:
            os.write(fd, (line + "\n").encode("utf-8"))
            os.close(fd)
        except OSError:
            pass  # the process that started us is gone; serve the others anyway
        fd = None

    return owner.run(ready)


def _check_needed(settings: Any) -> None:
    from smriti.errors import ConfigError
    from smriti.owner.service import uses_owner

    if settings.owner == "off":
        raise ConfigError("SMRITI_OWNER=off: processes open the store themselves")
    if not uses_owner(settings):
        raise ConfigError(
            f"DB_TYPE={settings.db_type} needs no owner process: every process connects "
            "to its server"
        )


def wait_unlocked(lock: Any, timeout: float = STOP_WAIT_SECONDS) -> bool:
    """Wait until nobody holds the owner lock file ``lock`` (at most ``timeout``
    seconds); whether it is free."""
    import fcntl

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.1)
        finally:
            os.close(fd)
    return False


def _format_status(d: dict[str, Any]) -> str:
    if not d["running"]:
        return f"no owner process is running for {d['store']} (the next smriti process starts one)"
    head = {
        "owner pid": d["pid"],
        "since": d["started_at"],
        "backend": d["backend"],
        "user": d["user"],
        "socket": d["socket"],
        "log": d["log"],
        "served": d["served"],
        "in flight": d["in_flight"],
    }
    rows = [(c["pid"], c["kind"], c["since"], c["requests"]) for c in d["clients"]]
    attached = output.table(("PID", "PROCESS", "SINCE", "REQUESTS"), rows) if rows else "-"
    return output.format_mapping(head) + f"\n\nattached ({len(rows)}):\n" + attached
