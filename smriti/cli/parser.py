"""The argument parser of ``smriti``: global flags, one subparser per command."""

from __future__ import annotations

import argparse
import math

from smriti.cli import commands, doctor_command, portable_commands

DESCRIPTION = """\
Smriti: graph-based, human-like memory for LLM agents, served over MCP.
With no command, serves MCP over stdio (what MCP clients start)."""

EPILOG = """\
Settings come from environment variables (ACCESSING_USER, STORAGE_LOCATION, DB_TYPE,
LLM_API_KEY, EMBEDDING_*, BACKUP_TYPE, ...); the global flags override them."""


def _importance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0.0 to 1.0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = _positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be at most 65535, got {value}")
    return value


def _global_flags() -> argparse.ArgumentParser:
    """Flags accepted before or after the command (SUPPRESS keeps the first one given)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("settings (override environment variables)")
    group.add_argument("--user", default=argparse.SUPPRESS, help="ACCESSING_USER")
    group.add_argument("--storage", default=argparse.SUPPRESS, help="STORAGE_LOCATION directory")
    group.add_argument("--db-type", default=argparse.SUPPRESS, help="DB_TYPE (kuzu, neo4j, ...)")
    group.add_argument(
        "--log-level",
        default=argparse.SUPPRESS,
        choices=("debug", "info", "warning", "error"),
        help="LOG_LEVEL (logs go to stderr)",
    )
    return common


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


def build_parser() -> argparse.ArgumentParser:
    """The full ``smriti`` parser; each subparser sets ``handler``."""
    common = _global_flags()
    parser = argparse.ArgumentParser(
        prog="smriti",
        description=DESCRIPTION,
        epilog=EPILOG,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from smriti import __version__

    parser.add_argument("--version", action="version", version=f"smriti {__version__}")
    parser.set_defaults(handler=commands.serve, transport="stdio", host="127.0.0.1", port=8000)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")
    _add_serve(sub, common)
    _add_store(sub, common)
    _add_recall(sub, common)
    _add_simple(sub, common)
    portable_commands.add_parsers(sub, common)
    doctor_command.add_parser(sub, common)
    return parser


def _add_serve(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("serve", parents=[common], help="run the MCP server (the default)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    p.set_defaults(handler=commands.serve)


def _add_store(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("store", parents=[common], help="store a memory")
    p.add_argument("content", metavar="CONTENT", help="the text to remember; '-' reads stdin")
    p.add_argument("--importance", type=_importance, default=0.5, help="0.0-1.0 (default 0.5)")
    p.add_argument("--tags", default="", help="comma-separated tags")
    p.add_argument("--source", default="", help="where the memory came from")
    _json_flag(p)
    p.set_defaults(handler=commands.store)


def _add_recall(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("recall", parents=[common], help="recall memories (no query: list)")
    p.add_argument("query", metavar="QUERY", nargs="?", default="", help="what to remember")
    p.add_argument("--limit", type=_positive_int, default=5, help="results (default 5)")
    p.add_argument("--mode", choices=("recall", "search", "list"), default="recall")
    p.add_argument(
        "--type",
        dest="memory_type",
        choices=("episodic", "semantic", "procedural"),
        default=None,
        help="only this memory type",
    )
    _json_flag(p)
    p.set_defaults(handler=commands.recall)


def _add_simple(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("forget", parents=[common], help="delete a memory by id")
    p.add_argument("memory_id", metavar="ID")
    _json_flag(p)
    p.set_defaults(handler=commands.forget)
    simple = {
        "consolidate": ("decay, prune, cluster and index now", commands.consolidate),
        "stats": ("counts and the components in use", commands.stats),
        "sync": ("push a backup now", commands.sync),
        "plugins": ("installed plugins, what they register, load failures", commands.plugins),
    }
    for name, (text, handler) in simple.items():
        p = sub.add_parser(name, parents=[common], help=text)
        _json_flag(p)
        p.set_defaults(handler=handler)
