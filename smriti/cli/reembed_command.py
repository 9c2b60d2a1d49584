"""``smriti reembed``: move the user's store to the current embedding model.

Typical use: the store was made with the built-in lexical embedder (no API key, the
local model not yet downloaded); once the local model is available, ``smriti reembed``
embeds every memory and cue again with it, in the store's owner process when it has one
(servers using the store keep working). A progress line is drawn on stderr when it is a
terminal.
"""

from __future__ import annotations

import argparse
from typing import Any

from smriti.cli import output
from smriti.cli.commands import open_memory


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti reembed`` on the subcommand parser ``sub``."""
    p = sub.add_parser(
        "reembed",
        parents=[common],
        help="re-embed every memory with the current embedding model",
        description="Embed every memory and cue of the user's store again with the "
        "configured embedder and record it as the store's model: the way to move a "
        "store made with the lexical embedder to the local sentence model (or to an "
        "API). Does nothing when the store already uses that model, unless --force.",
    )
    p.add_argument("--batch-size", type=_batch, default=256, help="texts per batch (256)")
    p.add_argument("--force", action="store_true", help="re-embed even if the model is the same")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=reembed_command)


def reembed_command(args: argparse.Namespace) -> int:
    """Re-embed the store; print what was done."""
    from smriti.requests import ReembedRequest

    with open_memory(args, "reembed") as memory:
        report = memory.run(ReembedRequest.parse(args.batch_size, args.force))
    output.emit(report, args.json, _format)
    return 0


def _format(d: dict[str, Any]) -> str:
    if d["skipped"]:
        return f"nothing to do: the store already uses {d['new_model']} (--force re-embeds anyway)"
    return (
        f"re-embedded {d['engrams']} memories and {d['cues']} cues with {d['new_model']} "
        f"(was {d['old_model']}) in {d['seconds']:.1f} s"
    )


def _batch(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"must be from 1 to 10000, got {value}")
    return value
