"""The ``smriti`` command: the MCP server (default) and subcommands on the same engine.

``smriti`` with no subcommand serves MCP over stdio, which is what MCP clients start.
Expected errors print one line, ``smriti: error: ...``, on stderr and exit with 2 for
usage and configuration problems (including every bad path: a missing, unreadable or
directory input file, an output file in a missing directory, a storage location that is
a file) or 1 for runtime failures; never a traceback.

Heavy modules (the engine, plugins, the MCP SDK) are imported inside the commands so
that ``smriti --help`` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from smriti.cli.parser import build_parser

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    from smriti.private import restrict_umask

    # Before any thread exists: what this process and the engines it loads (Kùzu's
    # files, git's) create is private to its user (smriti.private).
    restrict_umask()
    parser = build_parser()
    args = parser.parse_args(argv)
    from smriti.errors import ConfigError, InvalidInput, PluginError, SmritiError

    try:
        return int(args.handler(args) or EXIT_OK)
    except (ConfigError, PluginError, InvalidInput) as exc:
        return _fail(exc, EXIT_USAGE)
    except SmritiError as exc:
        return _fail(exc, EXIT_RUNTIME)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `smriti recall | head`: the reader left, nothing to say
        _silence_stdout()
        return EXIT_OK
    except OSError as exc:  # a file went wrong at run time (disk full, removed meanwhile)
        where = f": {exc.filename}" if exc.filename else ""
        return _fail(OSError(f"{exc.strerror or exc}{where}"), EXIT_RUNTIME)


def _fail(exc: BaseException, code: int) -> int:
    message = " ".join(str(exc).split()) or type(exc).__name__
    print(f"smriti: error: {message}", file=sys.stderr)
    return code


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


__all__ = ["main"]
