"""The git backup provider: a local repository of snapshot files, pushed to ``GIT_BASE_URL``.

Layout: the local repository lives at ``{STORAGE_LOCATION}/{user}/backup-git/`` and holds
the snapshot files (``memory.jsonl``, a portable export, never a live database file)
under ``{user}/``, so several users can share one remote without collisions.

Remote: when ``GIT_BASE_URL`` ends in ``.git`` it is the repository's URL (any URL git
accepts: ``https://…/memory.git``, ``git@host:me/memory.git``, ``/srv/memory.git``,
``file:///srv/memory.git``); otherwise it is a base URL and the repository is
``{GIT_BASE_URL}/{user}-smriti.git`` (e.g. ``https://github.com/me`` →
``https://github.com/me/alice-smriti.git``). The repository must exist (it may be
empty); credentials come from git itself (credential helper, SSH agent, or a token in
the URL), never from a prompt.

Branch: the remote's default branch, read with ``git ls-remote --symref``; an empty
remote gets ``init.defaultBranch`` (or ``main``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from smriti.backup import BackupProvider, SyncReport
from smriti.errors import BackupError, ConfigError
from smriti.logs import get_logger
from smriti.model import utcnow
from smriti_backup_git.git import Git, redact

if TYPE_CHECKING:
    from smriti.config import Settings

log = get_logger(__name__)

REPO_DIR = "backup-git"
SNAPSHOT = "memory.jsonl"
TIMEOUT_ENV = "SMRITI_GIT_TIMEOUT"
DEFAULT_TIMEOUT = 120.0


def remote_url(base: str, user: str) -> str:
    """The remote repository URL for ``user`` (see the module docstring)."""
    base = base.strip()
    if not base:
        raise ConfigError(
            "BACKUP_TYPE=git needs GIT_BASE_URL: the URL of a git repository ending in .git, "
            f"or a base URL under which {user}-smriti.git is used"
        )
    if base.rstrip("/").endswith(".git"):
        return base.rstrip("/")
    return f"{base.rstrip('/')}/{user}-smriti.git"


def _timeout(settings: Settings) -> float:
    raw = settings.env.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        value = -1.0
    if not 1.0 <= value <= 3600.0:
        raise ConfigError(f"{TIMEOUT_ENV}={raw!r} is invalid (allowed: seconds, 1..3600)")
    return value


class GitBackup(BackupProvider):
    """Snapshots committed to a local repository and pushed to a git remote."""

    name = "git"
    aliases = ("github",)
    description = "snapshots pushed to a git remote (GIT_BASE_URL) with the system git"

    def __init__(self, settings: Settings, user: str) -> None:
        super().__init__(settings, user)
        self.remote = remote_url(settings.git_base_url, user)
        self.shown_remote = redact(self.remote)
        self.repo = settings.user_dir(user) / REPO_DIR
        self.git = Git(self.repo, timeout=_timeout(settings))

    # -- the contract ----------------------------------------------------------------
    def restore(self, target: Path) -> bool:
        """Fetch the remote's latest snapshot into ``target``; False when there is none."""
        branch = self._remote_branch()
        if branch is None:
            log.info("git backup remote is empty: nothing to restore", remote=self.shown_remote)
            return False
        self._ensure_repo()
        self._update_from_remote(branch)
        source = self.repo / self.user
        if not (source / SNAPSHOT).is_file():
            return False
        target.mkdir(parents=True, exist_ok=True)
        for item in sorted(source.iterdir()):
            if item.is_file():
                shutil.copy2(item, target / item.name)
        log.info(
            "git backup fetched", remote=self.shown_remote, branch=branch, commit=self._head()[:12]
        )
        return True

    def push(self, snapshot: Path) -> SyncReport:
        """Commit the snapshot files when they changed and push them to the remote."""
        files = sorted(p for p in snapshot.iterdir() if p.is_file())
        self._ensure_repo()
        branch = self._remote_branch()
        on_remote = branch is not None
        if branch is None:
            branch = self._default_branch()
            self._start_branch(branch)
        else:
            self._update_from_remote(branch)
        changed = self._stage(files)
        if changed:
            count = len(files)
            self.git.run(
                [
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "-m",
                    f"smriti snapshot of {self.user} at {utcnow().isoformat()} "
                    f"({count} file{'s' if count != 1 else ''})",
                ]
            )
        if (on_remote and not self._ahead(branch)) or not self._has_commits():
            return SyncReport(
                self.name, skipped=len(files), message="nothing to push: the snapshot is unchanged"
            )
        self._push(branch)
        commit = self._head()[:12]
        return SyncReport(
            self.name,
            pushed=[f"{self.user}/{name}" for name in changed],
            skipped=len(files) - len(changed),
            message=f"pushed commit {commit} to {self.shown_remote} ({branch})",
        )

    # -- remote ------------------------------------------------------------------------
    def _remote_branch(self) -> str | None:
        """The remote's default branch, or None when the remote has no branch yet."""
        result = self.git.run(
            ["ls-remote", "--symref", self.remote], check=False, cwd=self.repo.parent
        )
        if result.code != 0:
            raise BackupError(
                f"cannot reach the git backup remote {self.shown_remote}: "
                f"{self.git.describe(result)}"
            )
        head: str | None = None
        heads: list[str] = []
        for line in result.stdout.splitlines():
            ref, _, name = line.partition("\t")
            if ref.startswith("ref: ") and name == "HEAD":
                head = ref[5:].removeprefix("refs/heads/")
            elif name.startswith("refs/heads/"):
                heads.append(name.removeprefix("refs/heads/"))
        if not heads:
            return None
        if head in heads:
            return head
        current = self._local_branch()
        for choice in (current, "main", "master"):
            if choice in heads:
                return choice
        return sorted(heads)[0]

    def _push(self, branch: str) -> None:
        args = ["push", "--quiet", "origin", f"HEAD:refs/heads/{branch}"]
        result = self.git.run(args, check=False)
        if result.code != 0 and self._remote_branch() == branch:
            # Perhaps another machine pushed in between: rebase once and retry.
            log.info("git push rejected; rebasing on the remote and retrying", branch=branch)
            self._update_from_remote(branch)
            result = self.git.run(args, check=False)
        if result.code != 0:
            raise BackupError(
                f"git push to {self.shown_remote} ({branch}) failed: {self.git.describe(result)}"
            )

    # -- local repository --------------------------------------------------------------
    def _ensure_repo(self) -> None:
        if not (self.repo / ".git").is_dir():
            self.repo.mkdir(parents=True, exist_ok=True)
            self.git.run(["init", "--quiet"])
        remotes = self.git.run(["remote"]).stdout.split()
        verb = "set-url" if "origin" in remotes else "add"
        self.git.run(["remote", verb, "origin", self.remote])
        if self.git.run(["config", "--get", "user.email"], check=False).code != 0:
            self.git.run(["config", "user.name", "Smriti"])
            self.git.run(["config", "user.email", "smriti@localhost"])

    def _update_from_remote(self, branch: str) -> None:
        """Bring the local branch up to date: fetch, then rebase local commits on top."""
        tracking = f"refs/remotes/origin/{branch}"
        self.git.run(["fetch", "--quiet", "origin", f"+refs/heads/{branch}:{tracking}"])
        if not self._has_commits():
            self.git.run(["checkout", "--quiet", "--force", "-B", branch, tracking])
            return
        self.git.run(["checkout", "--quiet", "-B", branch])
        if self.git.run(["rebase", "--quiet", tracking], check=False).code != 0:
            # Snapshots are whole files: an unpushed older local snapshot is superseded.
            self.git.run(["rebase", "--abort"], check=False)
            log.warning(
                "local backup commits conflict with the remote; keeping the remote's", branch=branch
            )
            self.git.run(["reset", "--quiet", "--hard", tracking])

    def _start_branch(self, branch: str) -> None:
        if self._has_commits():
            self.git.run(["checkout", "--quiet", "-B", branch])
        else:
            self.git.run(["symbolic-ref", "HEAD", f"refs/heads/{branch}"])

    def _stage(self, files: list[Path]) -> list[str]:
        """Mirror the snapshot into ``{user}/`` and stage it; return changed file names."""
        dest = self.repo / self.user
        dest.mkdir(parents=True, exist_ok=True)
        names = {f.name for f in files}
        for old in dest.iterdir():
            if old.is_file() and old.name not in names:
                old.unlink()
        for f in files:
            shutil.copyfile(f, dest / f.name)
        self.git.run(["add", "--all", "--", self.user])
        diff = self.git.run(["diff", "--cached", "--name-only", "--", self.user])
        return [Path(p).name for p in diff.stdout.splitlines() if p.strip()]

    def _ahead(self, branch: str) -> bool:
        result = self.git.run(
            ["rev-list", "--count", f"refs/remotes/origin/{branch}..HEAD"], check=False
        )
        return result.code != 0 or int(result.stdout.strip() or 0) > 0

    def _has_commits(self) -> bool:
        return self.git.run(["rev-parse", "--verify", "--quiet", "HEAD"], check=False).code == 0

    def _head(self) -> str:
        return self.git.run(["rev-parse", "HEAD"], check=False).stdout.strip()

    def _local_branch(self) -> str | None:
        if not (self.repo / ".git").is_dir():
            return None
        result = self.git.run(["symbolic-ref", "--short", "HEAD"], check=False)
        return result.stdout.strip() or None

    def _default_branch(self) -> str:
        result = self.git.run(
            ["config", "--get", "init.defaultBranch"], check=False, cwd=self.repo.parent
        )
        return result.stdout.strip() or "main"
