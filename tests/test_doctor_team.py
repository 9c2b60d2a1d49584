"""``smriti doctor`` on the team server: where the audit log goes, and its mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from smriti.audit import AuditLog
from smriti.config import Settings
from smriti.doctor.team import team_checks


def test_doctor_names_the_audit_log_and_warns_when_others_may_read_it(tmp_path: Path) -> None:
    settings = Settings.from_env({"STORAGE_LOCATION": str(tmp_path)})
    audit, limits = team_checks(settings)
    assert audit.status == "ok" and str(tmp_path / ".audit.jsonl") in audit.detail
    assert "100 per user" in limits.detail
    AuditLog(tmp_path / ".audit.jsonl").close()
    assert (tmp_path / ".audit.jsonl").stat().st_mode & 0o777 == 0o600
    os.chmod(tmp_path / ".audit.jsonl", 0o644)
    loose = team_checks(settings)[0]
    assert loose.status == "warn" and "chmod 600" in loose.fix
    off = Settings.from_env({"STORAGE_LOCATION": str(tmp_path), "SMRITI_AUDIT_LOG": "off"})
    assert team_checks(off)[0].detail.startswith("off")


def test_the_doctor_command_shows_the_audit_log(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "access.jsonl"
    env = {**os.environ, "STORAGE_LOCATION": str(tmp_path), "SMRITI_AUDIT_LOG": str(path)}
    smriti = str(Path(sys.executable).with_name("smriti"))
    shown = subprocess.run([smriti, "doctor"], env=env, capture_output=True, text=True, timeout=120)
    line = next(ln for ln in shown.stdout.splitlines() if "audit log" in ln)
    assert str(path) in line
