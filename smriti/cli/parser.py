"""The argument parser of ``smriti``: global flags, one subparser per command."""

from __future__ import annotations

import argparse
import math

from smriti.cli import (
    capture_commands,
    commands,
    doctor_command,
    graph_commands,
    keys_command,
    migrate_command,
    owner_command,
    portable_commands,
    reembed_command,
    tidy_commands,
    ui_command,
)

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


class _Subcommands(argparse._SubParsersAction):
    """Subcommand registry: a subcommand given no ``description`` shows its ``help`` as
    one (a sentence), so ``smriti COMMAND --help`` always says what the command does."""

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:
        text = str(kwargs.get("help") or "").strip()
        if text and not kwargs.get("description"):
            kwargs["description"] = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
        return super().add_parser(name, **kwargs)  # type: ignore[arg-type]


def _global_flags() -> argparse.ArgumentParser:
    """Flags accepted before or after the command (SUPPRESS keeps the first one given)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("settings (override environment variables)")
    group.add_argument("--user", default=argparse.SUPPRESS, help="ACCESSING_USER")
    group.add_argument("--storage", default=argparse.SUPPRESS, help="STORAGE_LOCATION directory")
    group.add_argument(
        "--db-type", default=argparse.SUPPRESS, help="DB_TYPE (auto, ladybug, kuzu, neo4j, ...)"
    )
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
    from smriti import __version__  # the installed distribution's, importlib.metadata

    parser.add_argument(
        "--version",
        action="version",
        version=f"smriti {__version__}",
        help="print the installed version and exit",
    )
    parser.set_defaults(handler=commands.serve, transport="stdio", host="127.0.0.1", port=8000)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", action=_Subcommands)
    _add_serve(sub, common)
    _add_store(sub, common)
    _add_recall(sub, common)
    _add_versions(sub, common)
    _add_simple(sub, common)
    portable_commands.add_parsers(sub, common)
    doctor_command.add_parser(sub, common)
    reembed_command.add_parser(sub, common)
    graph_commands.add_parsers(sub, common)
    tidy_commands.add_parsers(sub, common)
    owner_command.add_parser(sub, common)
    keys_command.add_parser(sub, common)
    migrate_command.add_parser(sub, common)
    ui_command.add_parser(sub, common)
    capture_commands.add_parsers(sub, common)
    return parser


def _add_serve(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "serve",
        parents=[common],
        help="run the MCP server (the default)",
        description="Serve MCP over stdio (what MCP clients start) or streamable HTTP, "
        "until stdin closes or SIGTERM/SIGINT arrives.",
    )
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    p.set_defaults(handler=commands.serve)


def _add_store(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "store",
        parents=[common],
        help="store a memory",
        description="Store one memory: it is summarised, classified, linked to its cues "
        "and to similar memories, and printed with its id.",
    )
    p.add_argument("content", metavar="CONTENT", help="the text to remember; '-' reads stdin")
    p.add_argument("--importance", type=_importance, default=0.5, help="0.0-1.0 (default 0.5)")
    p.add_argument("--tags", default="", help="comma-separated tags")
    p.add_argument("--source", default="", help="where the memory came from")
    p.add_argument(
        "--occurred-at",
        default=None,
        metavar="WHEN",
        help="when it happened, ISO 8601 (default: now), for events stored after the fact",
    )
    p.add_argument(
        "--origin",
        choices=("user", "agent"),
        default="user",
        help="who said it: user (default: you, typing it) or agent (a program's conclusion)",
    )
    _json_flag(p)
    p.set_defaults(handler=commands.store)


def _add_recall(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "recall",
        parents=[common],
        help="recall memories (no query: list)",
        description="Recall memories for QUERY, best first. --mode recall follows cues, "
        "meaning, words and associations; search is semantic similarity only (nothing "
        "below a similarity floor); list, or no QUERY, shows the most recently used.",
    )
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
    p.add_argument("--tags", default="", help="only memories with any of these (comma-separated)")
    p.add_argument(
        "--tag-match",
        choices=("any", "all"),
        default="any",
        help="any (default) or all of --tags",
    )
    p.add_argument("--since", default="", help="created at or after (ISO 8601 date or time)")
    p.add_argument("--until", default="", help="created before (ISO 8601 date or time)")
    p.add_argument(
        "--include-superseded",
        action="store_true",
        help="also old versions that a correction replaced",
    )
    p.add_argument("--cursor", default="", help="list mode: the next page (from next_cursor)")
    p.add_argument(
        "--origin",
        default="",
        help="only memories of this origin: user, agent, tool, import:smriti, or import: "
        "for every import",
    )
    _json_flag(p)
    p.set_defaults(handler=commands.recall)


def _add_versions(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """get, correct, history, update and related: commands on one memory by id."""
    p = sub.add_parser(
        "get",
        parents=[common],
        help="show one memory by id",
        description="Show the memory with ID: its content, type, importance, decay, "
        "access count, cluster, cues, associations and version chain.",
    )
    p.add_argument("memory_id", metavar="ID")
    _json_flag(p)
    p.set_defaults(handler=commands.get)

    p = sub.add_parser(
        "correct",
        parents=[common],
        help="replace a memory by a corrected version",
        description="Store CONTENT as a new version of the memory with ID. The old "
        "version is kept as history, marked superseded, and left out of recall; its "
        "links carry over. Importance and tags are kept unless given.",
    )
    p.add_argument("memory_id", metavar="ID")
    p.add_argument("content", metavar="CONTENT", help="the corrected text; '-' reads stdin")
    p.add_argument("--importance", type=_importance, default=None, help="0.0-1.0 (default: kept)")
    p.add_argument("--tags", default=None, help="comma-separated tags (default: kept)")
    p.add_argument(
        "--purge",
        action="store_true",
        help="forget and erase the earlier versions instead of keeping them as history",
    )
    _json_flag(p)
    p.set_defaults(handler=commands.correct)

    p = sub.add_parser(
        "history",
        parents=[common],
        help="every version of a memory",
        description="Show every version of the memory with ID, oldest first.",
    )
    p.add_argument("memory_id", metavar="ID")
    _json_flag(p)
    p.set_defaults(handler=commands.history)

    p = sub.add_parser(
        "update",
        parents=[common],
        help="change a memory's importance or tags",
        description="Change the importance and/or the tags of the memory with ID in "
        "place (--tags replaces the whole list; '' clears it).",
    )
    p.add_argument("memory_id", metavar="ID")
    p.add_argument("--importance", type=_importance, default=None, help="0.0-1.0")
    p.add_argument("--tags", default=None, help="the new comma-separated tags")
    _json_flag(p)
    p.set_defaults(handler=commands.update)

    p = sub.add_parser(
        "related",
        parents=[common],
        help="memories linked to a memory",
        description="Show the memories linked to the memory with ID (associations both "
        "ways, versions, shared cues, the same cluster), best first.",
    )
    p.add_argument("memory_id", metavar="ID")
    p.add_argument("--limit", type=_positive_int, default=10, help="results (default 10)")
    _json_flag(p)
    p.set_defaults(handler=commands.related)


def _add_simple(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "forget",
        parents=[common],
        help="delete a memory by id",
        description="Delete the memory with ID for good (ids come from recall); an unknown "
        "id is an error.",
    )
    p.add_argument("memory_id", metavar="ID")
    _json_flag(p)
    p.set_defaults(handler=commands.forget)
    p = sub.add_parser(
        "purge",
        parents=[common],
        help="forget a memory and erase it from the store and the backup's history",
        description="Forget the memory with ID (or take one already forgotten), erase it "
        "from the store's files, push a backup without it and remove it from every "
        "snapshot the backup keeps: the git backup's history is rewritten and "
        "force-pushed, older S3 object versions are deleted. Other clones of the remote "
        "keep their copies.",
    )
    p.add_argument("memory_id", metavar="ID")
    _json_flag(p)
    p.set_defaults(handler=commands.purge)
    simple = {
        "consolidate": (
            "decay, prune, cluster and index now",
            "Run consolidation now: decay, prune weak unimportant memories, remove orphan "
            "cues, re-cluster and create indexes (it also runs periodically while serving).",
            commands.consolidate,
        ),
        "stats": (
            "counts and the components in use",
            "Show how many memories, cues and links the user has, and the backend, "
            "embedder, extractor and backup in use.",
            commands.stats,
        ),
        "sync": (
            "push a backup now",
            "Push a consistent snapshot of the memory to the configured backup (BACKUP_TYPE).",
            commands.sync,
        ),
        "plugins": (
            "installed plugins, what they register, load failures",
            "List every plugin with its distribution and version, what it registers, and "
            "any plugin that failed to load.",
            commands.plugins,
        ),
    }
    for name, (text, description, handler) in simple.items():
        p = sub.add_parser(name, parents=[common], help=text, description=description)
        _json_flag(p)
        p.set_defaults(handler=handler)
