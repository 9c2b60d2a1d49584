"""Rendering a Diagnosis: aligned text for people, JSON for scripts; secrets scrubbed."""

from __future__ import annotations

import json
from typing import Any

from smriti.doctor.diagnose import Diagnosis

MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def to_dict(diagnosis: Diagnosis) -> dict[str, Any]:
    """The report as JSON-ready data: ``ok``, ``user``, ``settings``, ``checks``."""
    return {
        "ok": not diagnosis.failed,
        "user": diagnosis.user,
        "settings": [row.to_dict() for row in diagnosis.rows],
        "checks": [check.to_dict() for check in diagnosis.checks],
    }


def render_json(diagnosis: Diagnosis) -> str:
    """The report as indented JSON."""
    text = json.dumps(to_dict(diagnosis), indent=2, ensure_ascii=False)
    return scrub(text, diagnosis.secrets, json_escaped=True)


def render_text(diagnosis: Diagnosis) -> str:
    """Settings (name, value, origin), then one line per check with its fix."""
    rows = diagnosis.rows
    name_w = max(len(r.variable) for r in rows)
    value_w = min(48, max(len(r.value) for r in rows))
    lines = [f"settings for user {diagnosis.user} (origin: flag, env or default)"]
    for r in rows:
        note = f"  ({r.note})" if r.note else ""
        value = r.value.ljust(value_w)
        lines.append(f"  {r.variable.ljust(name_w)}  {value}  {r.origin}{note}")
    lines += ["", "checks"]
    check_w = max(len(c.name) for c in diagnosis.checks)
    for c in diagnosis.checks:
        fix = f" -> fix: {c.fix}" if c.fix and c.status != "ok" else ""
        tip = f" (tip: {c.fix})" if c.fix and c.status == "ok" else ""
        lines.append(f"  {MARK[c.status]}  {c.name.ljust(check_w)}  {c.detail}{fix}{tip}")
    failed = sum(c.status == "fail" for c in diagnosis.checks)
    warned = sum(c.status == "warn" for c in diagnosis.checks)
    lines += ["", f"{failed} failed, {warned} warnings, {len(diagnosis.checks)} checks"]
    return scrub("\n".join(lines), diagnosis.secrets)


def scrub(text: str, secrets: list[str], *, json_escaped: bool = False) -> str:
    """``text`` with every secret value replaced by ``***`` (a last line of defence)."""
    for secret in secrets:
        text = text.replace(secret, "***")
        if json_escaped:
            text = text.replace(json.dumps(secret)[1:-1], "***")
    return text
