"""``smriti ui``: open the memory web page for the user's own store."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti ui`` on ``sub``."""
    p = sub.add_parser(
        "ui",
        parents=[common],
        help="browse, search and correct your memories in a web page",
        description="Serve the memory web page on 127.0.0.1 for your own store (search, "
        "list, a memory's page with its cues, links and versions, correct, update, "
        "forget, near-duplicates and merge, the graph, clusters, counts) until Ctrl-C. "
        "The first line printed is the page's URL with a one-time token; the browser "
        "opens it unless --no-browser is given or there is no display.",
    )
    p.add_argument(
        "--port", type=_port_or_free, default=0, help="port on 127.0.0.1 (default: a free one)"
    )
    p.add_argument("--no-browser", action="store_true", help="print the URL only")
    p.set_defaults(handler=ui)


def _port_or_free(text: str) -> int:
    """A TCP port, or 0 for a free one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, got {value}")
    return value


def ui(args: argparse.Namespace) -> int:
    """Serve the page until SIGINT/SIGTERM."""
    from smriti.cli.commands import _cli_log_level, load_settings
    from smriti.logs import configure_logging
    from smriti.webui.local import run_ui

    settings = load_settings(args)
    configure_logging(_cli_log_level(args, settings))
    return run_ui(settings, args.port, browser=not args.no_browser)
