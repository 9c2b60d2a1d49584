"""``smriti doctor``'s probe of the git backup's remote: ``git ls-remote``, no prompts."""

from __future__ import annotations

import os
import subprocess

from smriti import DoctorCheck
from smriti_backup_git.git import redact

#: ``git ls-remote`` includes a TLS or SSH handshake and authentication.
GIT_TIMEOUT = 5.0
FIX = "check GIT_BASE_URL and git's credentials (credential helper, SSH agent)"


def git_remote(remote: str) -> DoctorCheck:
    """``git ls-remote`` on the backup remote; never raises."""
    shown = redact(remote)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes -o ConnectTimeout=3")
    try:
        result = subprocess.run(
            ["git", "ls-remote", "--symref", remote, "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        return DoctorCheck(
            "git remote", "fail", "git is not installed", "install git (the backup uses it)"
        )
    except subprocess.TimeoutExpired:
        return DoctorCheck(
            "git remote", "fail", f"{shown} did not answer in {GIT_TIMEOUT:g} s", FIX
        )
    if result.returncode != 0:
        lines = [ln.strip() for ln in result.stderr.splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.startswith(("fatal:", "error:"))), "")
        reason = redact(first or (lines[0] if lines else f"exit {result.returncode}"))
        return DoctorCheck("git remote", "fail", f"{shown}: {reason}", FIX)
    return DoctorCheck("git remote", "ok", f"{shown} answers ({_default_branch(result.stdout)})")


def _default_branch(out: str) -> str:
    for line in out.splitlines():
        if line.startswith("ref: "):
            return "default branch " + line.split()[1].removeprefix("refs/heads/")
    return "empty repository" if not out.strip() else "no default branch"
