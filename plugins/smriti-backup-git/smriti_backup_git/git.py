"""A small wrapper around the system ``git``: argument lists, no shell, no prompts, timeouts.

Every command runs with ``GIT_TERMINAL_PROMPT=0`` (a missing credential fails instead
of waiting for a password on a terminal nobody watches) and a timeout. Errors become
BackupError with git's own message, and any credentials embedded in URLs
(``https://user:token@host``) are replaced by ``***`` before they reach a message or a
log line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from smriti import BackupError
from smriti.backend import PRIVATE_UMASK

#: ``scheme://userinfo@`` → ``scheme://***@`` (tokens, passwords, user names).
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def redact(text: str) -> str:
    """``text`` with the user-info part of every URL replaced by ``***``."""
    return _USERINFO.sub(r"\g<scheme>***@", text)


@dataclass(slots=True, frozen=True)
class Result:
    """A finished git command."""

    code: int
    stdout: str
    stderr: str


class Git:
    """Runs git commands in ``cwd`` (or nowhere in particular for remote queries)."""

    def __init__(
        self, cwd: Path, timeout: float = 120.0, environ: Mapping[str, str] | None = None
    ) -> None:
        exe = shutil.which("git")
        if exe is None:
            raise BackupError(
                "BACKUP_TYPE=git needs the git command, which is not installed (or not on PATH)"
            )
        self.exe = exe
        self.cwd = cwd
        self.timeout = timeout
        env = dict(os.environ if environ is None else environ)
        env.update(
            GIT_TERMINAL_PROMPT="0",
            GCM_INTERACTIVE="never",
            GIT_ASKPASS=env.get("GIT_ASKPASS", ""),
            LC_ALL="C",  # stable, parseable messages
        )
        env.pop("GIT_DIR", None)
        env.pop("GIT_WORK_TREE", None)
        self.env = env

    def run(self, args: Sequence[str], *, check: bool = True, cwd: Path | None = None) -> Result:
        """Run ``git <args>``; raise BackupError on failure when ``check``."""
        where = cwd or self.cwd
        try:
            proc = subprocess.run(
                [self.exe, *args],
                cwd=where if where.exists() else None,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
                stdin=subprocess.DEVNULL,
                umask=PRIVATE_UMASK,  # the working copy holds memories: private
            )
        except subprocess.TimeoutExpired:
            raise BackupError(
                f"git {args[0]} did not finish within {self.timeout:.0f} s "
                "(is the remote reachable?)"
            ) from None
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        if check and result.code != 0:
            raise BackupError(f"git {args[0]} failed: {self.describe(result)}")
        return result

    @staticmethod
    def describe(result: Result) -> str:
        """git's error output on one line, credentials removed."""
        text = " ".join((result.stderr or result.stdout).split()) or f"exit code {result.code}"
        return redact(text)[:500]
