"""``smriti export``, ``smriti import`` and ``smriti hash``: portable copies of a memory.

``export PATH`` writes the user's whole graph as versioned JSON Lines (``.gz`` paths are
compressed); ``import PATH`` loads such a file into the user's store (empty, unless
``--merge``), re-embedding when the file came from another embedding model; ``hash``
prints the store's canonical fingerprint, equal on both sides of an exact copy.
A progress line is drawn on stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from smriti.cli import output
from smriti.cli.commands import open_memory
from smriti.errors import InvalidInput


def export(args: argparse.Namespace) -> int:
    """Write the user's memory to PATH."""
    from smriti import validation
    from smriti.requests import ExportRequest

    path = validation.output_file(args.path)  # before the store is opened
    if args.to_format:
        return _export_to(args, path)
    vectors = "list" if args.float_lists else "base64"
    with open_memory(args, "export") as memory:
        # An absolute path: the owner process may run in another directory.
        report = memory.run(ExportRequest.parse(str(path.resolve()), vectors))
    output.emit(report, args.json, _format_export)
    return 0


def import_(args: argparse.Namespace) -> int:
    """Load PATH into the user's store."""
    from smriti import validation
    from smriti.requests import ImportRequest

    if args.from_format:
        return _import_from(args)
    if args.dry_run:
        raise InvalidInput("--dry-run previews an import from another tool: add --from FORMAT")
    path = validation.input_file(args.path)  # before the store is opened
    with open_memory(args, "import") as memory:
        report = memory.run(ImportRequest.parse(str(path.resolve()), args.merge))
    output.emit(report, args.json, _format_import)
    return 0


def _import_from(args: argparse.Namespace) -> int:
    """``import --from FORMAT PATH``: another memory tool's file or folder."""
    from smriti.requests import ImportFromRequest

    path = Path(args.path).expanduser()
    if not path.exists():
        raise InvalidInput(f"{path}: no such file or folder")
    request = ImportFromRequest.parse(args.from_format, str(path.resolve()), args.dry_run)
    with open_memory(args, "import") as memory:
        report = memory.run(request)
    output.emit(report, args.json, _format_import_from)
    return 0


def _export_to(args: argparse.Namespace, path: Path) -> int:
    """``export --to FORMAT PATH``: the user's memory in another tool's format."""
    from smriti.requests import ExportToRequest

    request = ExportToRequest.parse(args.to_format, str(path.resolve()))
    with open_memory(args, "export") as memory:
        report = memory.run(request)
    output.emit(report, args.json, _format_export_to)
    return 0


def hash_(args: argparse.Namespace) -> int:
    """Print the canonical hash of the user's store."""
    from smriti.requests import HashRequest

    with open_memory(args, "hash") as memory:
        data = memory.run(HashRequest())
    output.emit(data, args.json, lambda d: d["canonical_hash"])
    return 0


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def _format_export(d: dict[str, Any]) -> str:
    size = d["bytes"] / 1e6
    line = f"exported {_counts(d['counts'])} to {d['path']} ({size:.1f} MB, {d['seconds']:.1f} s)"
    if d.get("skipped_edges"):
        line += f"\n{d['skipped_edges']} edges written during the export were left out"
    return line


def _format_import(d: dict[str, Any]) -> str:
    line = f"imported {_counts(d['counts'])} from {d['path']} ({d['seconds']:.1f} s)"
    if d["re_embedded"]:
        line += f"\nre-embedded with {d['target_model']} (the file used {d['source_model']})"
    if d["merged_cues"]:
        line += f"\n{d['merged_cues']} cues merged into existing ones"
    return line


def _format_import_from(d: dict[str, Any]) -> str:
    # a dry run stores nothing, so it cannot tell which records repeat a memory
    verb = "would store up to" if d["dry_run"] else "stored"
    lines = [
        f"{d['records']} records read from {d['path']} ({d['format']}): {verb} {d['stored']}, "
        f"{d['already_there']} already there, {d['merged']} merged into existing memories, "
        f"{d['rejected_count']} skipped"
    ]
    if not d["dry_run"]:
        lines.append(f"{d['associations']} associations made")
    if d["redacted"]:
        lines.append(f"{d['redacted']} secrets redacted")
    lines += [f"  skipped {r['where']}: {r['reason']}" for r in d["rejected"]]
    if d["rejected_count"] > len(d["rejected"]):
        lines.append(f"  ... and {d['rejected_count'] - len(d['rejected'])} more")
    if d["sample"]:
        lines.append("sample:")
        lines += [f"  {s['key']}: {s['content'][:100]!r}" for s in d["sample"]]
    return "\n".join(lines)


def _format_export_to(d: dict[str, Any]) -> str:
    return (
        f"exported {d['observations']} memories as {d['entities']} entities and "
        f"{d['relations']} relations to {d['path']} ({d['format']})"
    )


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``export``, ``import`` and ``hash`` on the ``smriti`` subparsers."""
    p = sub.add_parser(
        "export",
        parents=[common],
        help="write your memory to a JSONL file",
        description="Write the user's whole memory graph to PATH as versioned JSON Lines "
        "(.gz compresses); the directory must exist.",
    )
    p.add_argument("path", metavar="PATH", help="output file (.gz to compress)")
    p.add_argument(
        "--to",
        dest="to_format",
        metavar="FORMAT",
        help="write another tool's format instead: mcp-memory (the reference memory "
        "server's memory.jsonl)",
    )
    p.add_argument(
        "--float-lists", action="store_true", help="write embeddings as JSON numbers, not base64"
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=export)
    p = sub.add_parser(
        "import",
        parents=[common],
        help="load a file made by `smriti export`",
        description="Load a file made by `smriti export` into the user's store (which must "
        "be empty, unless --merge), re-embedding if it came from another embedding model.",
    )
    p.add_argument(
        "path",
        metavar="PATH",
        help="a smriti export (.jsonl or .jsonl.gz), or with --from another tool's file or folder",
    )
    p.add_argument("--merge", action="store_true", help="add to a store that is not empty")
    p.add_argument(
        "--from",
        dest="from_format",
        metavar="FORMAT",
        help="import another memory tool's data instead: mcp-memory, mcp-memory-service, "
        "basic-memory, mem0, markdown or claude-code (re-running adds nothing)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="with --from: show counts and a sample only"
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=import_)
    p = sub.add_parser(
        "hash",
        parents=[common],
        help="canonical hash of your memory graph",
        description="Print the canonical hash of the user's memory graph: equal on both "
        "sides of an exact copy (export then import).",
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=hash_)
