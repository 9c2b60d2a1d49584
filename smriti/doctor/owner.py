"""The owner process of an embedded store: whether one runs, and who is attached.

Doctor only looks: it attaches to a running owner for its status and never starts one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smriti.doctor.checks import Check, ok, warn

if TYPE_CHECKING:
    from smriti.config import Settings


def owner_status(settings: Settings) -> dict[str, Any] | None:
    """The running owner's status, or None when none runs (or owners are off)."""
    from smriti.owner.service import owner_supported

    if settings.owner == "off" or not owner_supported():
        return None
    from smriti.owner.client import RemoteService

    service = RemoteService.existing(settings, "doctor")
    if service is None:
        return None
    with service:
        return service.owner_status()


def owner_check(settings: Settings, status: dict[str, Any] | None) -> Check:
    """One line on the owner: off, none running, or its pid and attached processes."""
    from smriti.owner.service import owner_supported

    if settings.owner == "off":
        return warn(
            "owner",
            "off (SMRITI_OWNER=off): one process at a time can open this store",
            "unset SMRITI_OWNER so that several MCP clients and the CLI can share it",
        )
    if not owner_supported():
        return warn("owner", "not available on this platform: one process at a time")
    if status is None:
        return ok("owner", "no owner process running (the next smriti process starts one)")
    others = [c for c in status["clients"] if c["kind"] != "doctor"]
    attached = ", ".join(f"pid {c['pid']} ({c['kind']})" for c in others) or "nobody"
    return ok(
        "owner",
        f"pid {status['pid']} since {status['started_at']}, {status['served']} requests "
        f"served; attached: {attached}",
    )
