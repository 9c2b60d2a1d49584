"""``smriti doctor``'s probe of the JSON file backend: can the user's file be read?"""

from __future__ import annotations

import json
from pathlib import Path

from smriti import DoctorCheck

NAME = "jsonfile store"


def file_check(path: Path) -> DoctorCheck:
    """``ok`` with the memory count, ``ok`` for a store not made yet, ``fail`` naming the
    file when it is not this backend's JSON; never raises."""
    if not path.exists():
        return DoctorCheck(NAME, "ok", f"{path} will be created on first use")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        engrams = len(data["engrams"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        fix = f"restore {path} from a backup, or move it away to start an empty store"
        return DoctorCheck(NAME, "fail", f"{path} cannot be read ({reason})", fix)
    return DoctorCheck(NAME, "ok", f"{path} holds {engrams} memories")
