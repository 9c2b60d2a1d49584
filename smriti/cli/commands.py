"""The ``smriti`` subcommands. Each takes the parsed arguments and returns an exit code.

Data commands open the engine for the configured user, do one thing and close it (a
final backup sync happens on close when a backup provider is configured).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from smriti.cli import output

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.engine import Engine


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
def open_engine(args: argparse.Namespace) -> Iterator[Engine]:
    """The configured user's engine, opened for the duration of one command."""
    from smriti.logs import configure_logging

    settings = load_settings(args)
    configure_logging(_cli_log_level(args, settings))
    from smriti import validation
    from smriti.engine import Engine

    validation.storage_dirs(settings.storage_location, settings.user_dir())

    engine = Engine.from_settings(settings)
    with engine:
        yield engine


def serve(args: argparse.Namespace) -> int:
    """Run the MCP server until stdin closes (stdio) or SIGTERM/SIGINT."""
    settings = load_settings(args)
    from smriti.mcp_server import run_server

    return run_server(settings, transport=args.transport, host=args.host, port=args.port)


def store(args: argparse.Namespace) -> int:
    """Store CONTENT ('-' reads it from stdin)."""
    content = sys.stdin.read() if args.content == "-" else args.content
    with open_engine(args) as engine:
        outcome = engine.store(
            content, importance=args.importance, tags=args.tags, source=args.source or None
        )
        data = outcome.to_dict()
    output.emit(data, args.json, output.format_stored)
    return 0


def recall(args: argparse.Namespace) -> int:
    """Recall memories for QUERY (none: the most recently used)."""
    with open_engine(args) as engine:
        results = engine.recall(
            args.query or None, limit=args.limit, mode=args.mode, memory_type=args.memory_type
        )
    mode = args.mode if args.query.strip() else "list"
    data = output.recall_data(args.query, mode, results)
    if data.get("warning") and not args.json:
        print(f"smriti: warning: {data['warning']}", file=sys.stderr)
    output.emit(data, args.json, output.format_recall)
    return 0


def forget(args: argparse.Namespace) -> int:
    """Delete the memory with ID (an unknown id is an error)."""
    with open_engine(args) as engine:
        engram = engine.forget(args.memory_id)
    data = {
        "id": engram.id,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "created_at": engram.created_at.isoformat(),
    }
    output.emit(data, args.json, lambda d: f"forgot {d['id']}: {output.snippet(d['summary'])}")
    return 0


def consolidate(args: argparse.Namespace) -> int:
    """Run consolidation now."""
    with open_engine(args) as engine:
        data = engine.consolidate().to_dict()
    output.emit(data, args.json, output.format_mapping)
    return 0


def stats(args: argparse.Namespace) -> int:
    """Counts and components in use."""
    with open_engine(args) as engine:
        data = engine.stats()
    output.emit(data, args.json, output.format_mapping)
    return 0


def sync(args: argparse.Namespace) -> int:
    """Push a backup now."""
    with open_engine(args) as engine:
        data = engine.sync().to_dict()
    output.emit(data, args.json, output.format_sync)
    return 0


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
