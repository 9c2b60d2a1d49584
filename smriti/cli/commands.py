"""The ``smriti`` subcommands. Each takes the parsed arguments and returns an exit code.

Data commands reach the configured user's memory (through the store's owner process
when it has one, see ``smriti.owner``), do one thing and leave; a command that changed
something pushes a backup at the end when a backup provider is configured.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from smriti.cli import output

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.owner.service import Service


def load_settings(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by the global flags; logging set up."""
    from smriti.config import Settings
    from smriti.logs import configure_logging

    # Quiet until settings are known, so a plugin warning still reaches stderr.
    configure_logging(getattr(args, "log_level", None) or "warning")
    settings = Settings.from_env(
        accessing_user=getattr(args, "user", None),
        storage_location=getattr(args, "storage", None),
        db_type=getattr(args, "db_type", None),
        log_level=getattr(args, "log_level", None),
    )
    return settings


def _cli_log_level(args: argparse.Namespace, settings: Settings) -> str:
    """Data commands log warnings only, unless a level was asked for."""
    if getattr(args, "log_level", None) or os.environ.get("LOG_LEVEL", "").strip():
        return settings.log_level
    return "warning"


@contextmanager
def open_memory(args: argparse.Namespace, command: str) -> Iterator[Service]:
    """The configured user's memory for the duration of one command: through the
    store's owner process when it has one (another process may be using the store),
    else opened here. A command that changed something pushes a backup at the end when
    one is configured, as the engine's close does."""
    from smriti.logs import configure_logging

    settings = load_settings(args)
    configure_logging(_cli_log_level(args, settings))
    from smriti.owner.service import open_service

    with open_service(settings, f"cli {command}") as service:
        yield service


def serve(args: argparse.Namespace) -> int:
    """Run the MCP server until stdin closes (stdio) or SIGTERM/SIGINT."""
    settings = load_settings(args)
    early = None
    if args.transport == "stdio":
        from smriti.mcp_server.early import EarlyInitialize

        early = EarlyInitialize().start()  # answers initialize while the SDK is imported
    from smriti.mcp_server import run_server

    # Once the server is closed only the interpreter's exit is left, and a client's
    # repeated SIGTERM (the MCP SDK signals the process group) would end this clean
    # exit as "killed by SIGTERM": the server leaves the signals ignored, with no
    # default handler in between.
    code = run_server(
        settings,
        transport=args.transport,
        host=args.host,
        port=args.port,
        early=early,
        leave_signals=signal.SIG_IGN,
    )
    # Python puts the default handlers back while it finalizes; and a signal that
    # stopped the server left its own handler in place.
    for sig in (signal.SIGTERM, signal.SIGINT):
        with suppress(ValueError):  # only the main thread may (a server run on another)
            signal.signal(sig, signal.SIG_IGN)
    return code


def store(args: argparse.Namespace) -> int:
    """Store CONTENT ('-' reads it from stdin)."""
    from smriti.requests import StoreRequest

    content = sys.stdin.read() if args.content == "-" else args.content
    with open_memory(args, "store") as memory:
        request = StoreRequest.parse(
            content,
            importance=args.importance,
            tags=args.tags,
            source=args.source or None,
            occurred_at=args.occurred_at,
            origin=args.origin,
            max_chars=memory.settings.max_content_chars,
        )
        data = memory.run(request)
        _push_backup(memory)
    output.emit(data, args.json, output.format_stored)
    return 0


def recall(args: argparse.Namespace) -> int:
    """Recall memories for QUERY (none: the most recently used)."""
    from smriti.requests import RecallRequest

    with open_memory(args, "recall") as memory:
        request = RecallRequest.parse(
            args.query or None,
            limit=args.limit,
            mode=args.mode,
            memory_type=args.memory_type,
            tags=args.tags or None,
            tag_match=args.tag_match,
            since=args.since or None,
            until=args.until or None,
            include_superseded=args.include_superseded,
            cursor=args.cursor or None,
            origin=args.origin or None,
            max_limit=memory.settings.max_recall_limit,
        )
        found = memory.run(request)
    data = output.recall_data(args.query, request.shown_mode, found)
    if data.get("warning") and not args.json:
        print(f"smriti: warning: {data['warning']}", file=sys.stderr)
    output.emit(data, args.json, output.format_recall)
    return 0


def get(args: argparse.Namespace) -> int:
    """Show the memory with ID: its cues, associations and versions."""
    from smriti.requests import GetRequest

    with open_memory(args, "get") as memory:
        data = memory.run(GetRequest.parse(args.memory_id))
    output.emit(data, args.json, output.format_detail)
    return 0


def correct(args: argparse.Namespace) -> int:
    """Replace the memory with ID by a corrected version ('-' reads it from stdin)."""
    from smriti.requests import CorrectRequest

    content = sys.stdin.read() if args.content == "-" else args.content
    request = CorrectRequest.parse(
        args.memory_id, content, importance=args.importance, tags=args.tags, purge=args.purge
    )
    with open_memory(args, "correct") as memory:
        data = memory.run(request)
        _push_backup(memory)
    output.emit(data, args.json, output.format_corrected)
    return 0


def history(args: argparse.Namespace) -> int:
    """Every version of the memory with ID, oldest first."""
    from smriti.requests import HistoryRequest

    with open_memory(args, "history") as memory:
        data = memory.run(HistoryRequest.parse(args.memory_id))
    output.emit(data, args.json, output.format_history)
    return 0


def update(args: argparse.Namespace) -> int:
    """Change the importance and/or the tags of the memory with ID."""
    if args.importance is None and args.tags is None:
        from smriti.errors import InvalidInput

        raise InvalidInput("update needs --importance or --tags (or both)")
    from smriti.requests import UpdateRequest

    request = UpdateRequest.parse(args.memory_id, importance=args.importance, tags=args.tags)
    with open_memory(args, "update") as memory:
        data = memory.run(request)
        _push_backup(memory)
    output.emit(data, args.json, lambda d: output.format_memory(d["memory"]))
    return 0


def related(args: argparse.Namespace) -> int:
    """The memories linked to the memory with ID, best first."""
    from smriti.requests import RelatedRequest

    request = RelatedRequest.parse(args.memory_id, limit=args.limit)
    with open_memory(args, "related") as memory:
        data = memory.run(request)
    output.emit(data, args.json, output.format_related)
    return 0


def forget(args: argparse.Namespace) -> int:
    """Delete the memory with ID (an unknown id is an error)."""
    from smriti.requests import ForgetRequest

    request = ForgetRequest.parse(args.memory_id)
    with open_memory(args, "forget") as memory:
        data = memory.run(request)
        _push_backup(memory)
    output.emit(data, args.json, lambda d: f"forgot {d['id']}: {output.snippet(d['summary'])}")
    return 0


def purge(args: argparse.Namespace) -> int:
    """Forget the memory with ID, erase it from the store's files and from every
    snapshot the backup keeps; the warning about other copies goes to stderr."""
    from smriti.requests import PurgeRequest

    request = PurgeRequest.parse(args.memory_id)
    with open_memory(args, "purge") as memory:
        data = memory.run(request)
    print(f"warning: {data['warning']}", file=sys.stderr)
    backup = data.get("backup_purge", {})
    if backup.get("warning"):
        print(f"warning: {backup['warning']}", file=sys.stderr)
    output.emit(data, args.json, _format_purged)
    return 0


def _format_purged(data: dict) -> str:
    backup = data.get("backup_purge")
    where = f"; backup: {backup['message']}" if backup else " (no backup configured)"
    return f"purged {data['id']}: erased from the store{where}"


def consolidate(args: argparse.Namespace) -> int:
    """Run consolidation now."""
    from smriti.requests import ConsolidateRequest

    with open_memory(args, "consolidate") as memory:
        data = memory.run(ConsolidateRequest(), None)  # a progress line on a terminal
    output.emit(data, args.json, output.format_mapping)
    return 0


def stats(args: argparse.Namespace) -> int:
    """Counts and components in use."""
    from smriti.requests import StatsRequest

    with open_memory(args, "stats") as memory:
        data = memory.run(StatsRequest())
    output.emit(data, args.json, output.format_mapping)
    return 0


def sync(args: argparse.Namespace) -> int:
    """Push a backup now."""
    from smriti.requests import SyncRequest

    with open_memory(args, "sync") as memory:
        data = memory.run(SyncRequest(), False)
    output.emit(data, args.json, output.format_sync)
    return 0


def _push_backup(memory: Service) -> None:
    """After a change through an owner, push the backup now (an engine opened here does
    it when it closes), so a one-shot command leaves the remote as up to date as before."""
    if not memory.remote or memory.settings.backup_type == "none":
        return
    from smriti.errors import SmritiError
    from smriti.logs import get_logger
    from smriti.requests import SyncRequest

    try:
        memory.run(SyncRequest(), False)  # quietly: the command's own output follows
    except SmritiError as exc:  # the change is stored; the owner pushes again later
        get_logger(__name__).error("backup push failed", error=str(exc))


def plugins(args: argparse.Namespace) -> int:
    """Every plugin, its distribution, version, what it registers; load failures."""
    from smriti.logs import configure_logging
    from smriti.plugins import Registry, create_plugin_manager

    configure_logging(getattr(args, "log_level", None) or "error")
    pm, report = create_plugin_manager()
    registers: dict[str, dict[str, list[str]]] = {}
    registry_error = ""
    try:
        registry = Registry(pm)
    except Exception as exc:  # a duplicate name: show it with the rest of the report
        registry_error = str(exc)
    else:
        for (kind, name), owner in sorted(registry.owners.items()):
            registers.setdefault(owner, {}).setdefault(kind, []).append(name)
    data: dict[str, Any] = {
        "plugins": [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "registers": registers.get(info.name, {}),
            }
            for info in report.loaded
        ],
        "failures": dict(report.failures),
    }
    if registry_error:
        data["registry_error"] = registry_error
    output.emit(data, args.json, output.format_plugins)
    return 1 if registry_error else 0
