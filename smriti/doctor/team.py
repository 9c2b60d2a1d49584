"""What doctor says about the team server (``smriti serve --transport http`` with
authentication): where its audit log goes, and the per-principal limits in effect."""

from __future__ import annotations

import stat

from smriti.audit import audit_path
from smriti.config import Settings
from smriti.doctor.checks import Check, ok, warn


def team_checks(settings: Settings) -> list[Check]:
    """``audit log`` and ``team limits`` lines."""
    return [_audit(settings), _limits(settings)]


def _audit(settings: Settings) -> Check:
    path = audit_path(settings)
    if path is None:
        return ok(
            "audit log",
            "off (SMRITI_AUDIT_LOG=off): an authenticated HTTP server records no access",
        )
    where = f"{path} (JSON lines: who called which tool on which memory ids; never content)"
    if not path.exists():
        return ok("audit log", f"{where}; created with mode 0600 by the first authenticated call")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return warn(
            "audit log",
            f"{where}; its mode is {mode:04o}: other users may read who did what",
            f"chmod 600 {path} (the server also does when it next starts)",
        )
    return ok("audit log", f"{where}; mode {mode:04o}")


def _limits(settings: Settings) -> Check:
    rate = settings.rate_limit
    shown = {
        "auto": "off on a loopback bind, 600/min otherwise",
        "off": "off",
    }.get(str(rate), f"{rate}/min")
    return ok(
        "team limits",
        f"sessions: {settings.user_sessions} per user, {settings.key_sessions} per key, idle "
        f"{settings.session_idle:g} s; tool calls: {shown} (burst {settings.rate_burst}); "
        f"HTTP: headers {settings.http_header_timeout:g} s, body "
        f"{settings.http_body_timeout:g} s, keep-alive {settings.http_keepalive:g} s, "
        f"{settings.http_max_connections} connections",
    )
