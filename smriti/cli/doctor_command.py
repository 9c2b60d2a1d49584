"""``smriti doctor``: the settings in effect and whether everything they name works.

Exit code 1 when any check fails, 0 otherwise (warnings included). Doctor never opens
the store and never downloads a model; a broken configuration is a ``fail`` line, not
an error exit.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti doctor`` on the subcommand parser ``sub``."""
    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="show the settings in effect and check the store, plugins and servers",
    )
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.set_defaults(handler=doctor)


def doctor(args: argparse.Namespace) -> int:
    """Print the report; 1 when a check failed."""
    from smriti.doctor import diagnose
    from smriti.doctor.report import render_json, render_text
    from smriti.logs import configure_logging

    # Doctor reports problems itself; plugin warnings would only repeat them on stderr.
    configure_logging("error")
    overrides = {
        "accessing_user": getattr(args, "user", None),
        "storage_location": getattr(args, "storage", None),
        "db_type": getattr(args, "db_type", None),
        "log_level": getattr(args, "log_level", None),
    }
    diagnosis = diagnose(os.environ, overrides)
    text = render_json(diagnosis) if args.json else render_text(diagnosis)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 1 if diagnosis.failed else 0
