"""``smriti migrate --to ENGINE``: move the user's store to another embedded engine.

The export and the import each run in a child process with its own engine
(``smriti.migrate``); this process imports neither.
"""

from __future__ import annotations

import argparse
from typing import Any

from smriti.cli import output
from smriti.cli.commands import load_settings


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti migrate`` on the subcommand parser ``sub``."""
    p = sub.add_parser(
        "migrate",
        parents=[common],
        help="move the store to another embedded engine (e.g. Kùzu to LadybugDB)",
        description="Copy the user's store to another embedded engine with everything in "
        "it (versions, associations, clusters, access statistics, embeddings), check the "
        "copy with the canonical hash, and use it from then on. The old files are kept "
        "until you remove them. Safe to interrupt and run again. Stop the servers using "
        "the store first.",
    )
    p.add_argument("--to", required=True, metavar="ENGINE", help="the engine: ladybug or kuzu")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=migrate_command)


def migrate_command(args: argparse.Namespace) -> int:
    """Move the store; print what was done."""
    from smriti.migrate import migrate
    from smriti.plugins import Registry, create_plugin_manager

    settings = load_settings(args)
    pm, _ = create_plugin_manager(environ=settings.env or None)
    report = migrate(settings, Registry(pm), args.to.strip().lower())
    output.emit(report.as_dict(), args.json, _format)
    return 0


def _format(d: dict[str, Any]) -> str:
    counts = ", ".join(f"{v} {k}" for k, v in d["counts"].items())
    kept = " ".join(d["old_files"]) or "none"
    return (
        f"moved {d['user']}'s store from {d['source']} to {d['target']} in "
        f"{d['seconds']:.1f} s ({counts}); canonical hash {d['canonical_hash'][:16]} "
        f"equal on both sides.\nThe old files are kept: {kept} (remove them when you no "
        "longer need them)"
    )
