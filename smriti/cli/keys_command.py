"""``smriti keys``: the API keys an HTTP server accepts, one or more per user.

``smriti keys create USER`` prints a new key once (only its hash is kept);
``smriti keys list`` shows every key but never a secret; ``smriti keys revoke KEY_ID``
refuses the key from the next request on, also in a server that is running. The keys
live in ``SMRITI_API_KEYS_FILE`` (default ``{STORAGE_LOCATION}/.api-keys.json``), see
``smriti.auth.keys``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from smriti.cli import output
from smriti.cli.commands import load_settings


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register ``smriti keys`` on the subcommand parser ``sub``."""
    p = sub.add_parser(
        "keys",
        parents=[common],
        help="API keys for the HTTP server: create, list, revoke",
        description="API keys let a team reach one Smriti HTTP server, each person with "
        "their own memory: a key belongs to one user and grants read, write or both. "
        "Clients send it as 'Authorization: Bearer KEY'.",
    )
    actions = p.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create", help="make a key for USER and print it (once)", parents=[common]
    )
    create.add_argument("key_user", metavar="USER", help="whose memory the key opens")
    create.add_argument(
        "--scope",
        action="append",
        choices=("read", "write"),
        help="what the key may do; repeat for both (default: read and write)",
    )
    create.add_argument("--name", default="", help="a label, e.g. the laptop it is for")
    create.add_argument("--json", action="store_true", help="print JSON for scripts")
    create.set_defaults(handler=create_command)
    listing = actions.add_parser("list", help="every key (never its secret)", parents=[common])
    listing.add_argument("--json", action="store_true", help="print JSON for scripts")
    listing.set_defaults(handler=list_command)
    revoke = actions.add_parser("revoke", help="refuse a key from now on", parents=[common])
    revoke.add_argument("key_id", metavar="KEY_ID", help="the id shown by `smriti keys list`")
    revoke.add_argument("--json", action="store_true", help="print JSON for scripts")
    revoke.set_defaults(handler=revoke_command)


def _store(args: argparse.Namespace) -> Any:
    from smriti.auth.keys import KeyStore, keys_file

    return KeyStore(keys_file(load_settings(args)))


def create_command(args: argparse.Namespace) -> int:
    """Make a key and print it; the secret cannot be shown again."""
    from smriti.auth.keys import parse_scopes, split_key

    store = _store(args)
    scopes = parse_scopes(args.scope)
    key = store.create(args.key_user, scopes, name=args.name)
    parts = split_key(key)
    assert parts is not None
    data = {"id": parts[0], "user": args.key_user, "scopes": list(scopes), "key": key}
    if args.json:
        output.emit(data, True, str)
    else:
        print(key)
        print(
            f"smriti: key {parts[0]} for {args.key_user} ({', '.join(scopes)}) saved to "
            f"{store.path}; copy it now, it is not shown again",
            file=sys.stderr,
        )
    return 0


def list_command(args: argparse.Namespace) -> int:
    """Print every key with its user, scopes and state."""
    store = _store(args)
    keys = [k.public() for k in store.all_keys()]
    output.emit({"file": str(store.path), "keys": keys}, args.json, _format_list)
    return 0


def revoke_command(args: argparse.Namespace) -> int:
    """Revoke a key (an unknown id is an error)."""
    key = _store(args).revoke(args.key_id)
    output.emit(key.public(), args.json, lambda k: f"revoked key {k['id']} of {k['user']}")
    return 0


def _format_list(data: dict[str, Any]) -> str:
    if not data["keys"]:
        return f"no API keys in {data['file']} (make one with `smriti keys create USER`)"
    rows = [
        (
            k["id"],
            k["user"],
            ",".join(k["scopes"]),
            k["created_at"],
            f"revoked {k['revoked_at']}" if k["revoked_at"] else "active",
            k["name"],
        )
        for k in data["keys"]
    ]
    return output.table(("id", "user", "scopes", "created", "state", "name"), rows)
