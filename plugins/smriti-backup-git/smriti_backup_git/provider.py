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

Branch: ``SMRITI_GIT_BRANCH`` when set; otherwise the branch that holds this user's
snapshot (the one pushed to), so restore and push always use the same branch even when
the remote's HEAD points elsewhere; otherwise the remote's default branch (``git
ls-remote --symref``). An empty remote gets ``init.defaultBranch`` (or ``main``).

Pushes are never forced: the snapshot is committed on the commit that was fetched, and
a rejected push while the branch moved raises SnapshotConflict, so the engine merges
the other machine's snapshot before it tries again. The one exception is ``smriti purge``
(``purge``): it rewrites this user's file in every commit and force-pushes with a lease
on the commit it rewrote (``history``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti import (
    BackupError,
    BackupProvider,
    ConfigError,
    Fetched,
    SnapshotConflict,
    SyncReport,
    get_logger,
)
from smriti.backend import copy_private, private_dir, utcnow
from smriti_backup_git import history
from smriti_backup_git.git import Git, redact
from smriti_backup_git.settings import GIT_BASE_URL, GIT_BRANCH, GIT_TIMEOUT, SETTINGS

if TYPE_CHECKING:
    from smriti import Settings

log = get_logger(__name__)

REPO_DIR = "backup-git"
SNAPSHOT = "memory.jsonl"
BRANCH_ENV = GIT_BRANCH.env
PUSH_ATTEMPTS = 5


@dataclass(slots=True, frozen=True)
class _State:
    """The remote branch chosen, its commit and this user's snapshot blob (None: absent)."""

    branch: str
    commit: str | None
    blob: str | None


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


class GitBackup(BackupProvider):
    """Snapshots committed to a local repository and pushed to a git remote."""

    name = "git"
    aliases = ("github",)
    description = "snapshots pushed to a git remote (GIT_BASE_URL) with the system git"
    declared_settings = SETTINGS

    def __init__(self, settings: Settings, user: str) -> None:
        super().__init__(settings, user)
        self.remote = remote_url(GIT_BASE_URL.read(settings.env), user)
        self.shown_remote = redact(self.remote)
        self.repo = settings.user_dir(user) / REPO_DIR
        self.git = Git(self.repo, timeout=GIT_TIMEOUT.read(settings.env))
        self.branch_setting = GIT_BRANCH.read(settings.env)

    # -- the contract ----------------------------------------------------------------
    def location(self) -> str:
        """``{remote} ({user}/memory.jsonl on branch …)``, credentials redacted."""
        branch = self._local_branch()
        on = f" on branch {branch}" if branch else ""
        return f"{self.shown_remote} ({self.user}/{SNAPSHOT}{on})"

    def restore(self, target: Path) -> bool:
        """Fetch the remote's latest snapshot into ``target``; False when there is none."""
        return self.fetch(target, None).downloaded

    def fetch(self, target: Path, known: str | None) -> Fetched:
        """Fetch the branch that holds the snapshot; copy the files unless ``known``.

        The version is the snapshot file's blob id; the base, the fetched commit."""
        state = self._remote_state()
        where = f"{self.shown_remote} ({self.user}/{SNAPSHOT} on branch {state.branch})"
        base = (state.branch, state.commit)
        if state.blob is None or state.blob == known:
            if state.blob is None:
                log.info("the git backup remote holds no snapshot of this user",
                         where=where)  # fmt: skip
            return Fetched(where, state.blob, False, base)
        assert state.commit is not None
        self.git.run(["checkout", "--quiet", "--force", "-B", state.branch, state.commit])
        source = self.repo / self.user
        private_dir(target)
        for item in sorted(source.iterdir()):
            if item.is_file():
                copy_private(item, target / item.name)
        log.info("git backup fetched", remote=self.shown_remote, branch=state.branch,
                 commit=state.commit[:12])  # fmt: skip
        return Fetched(where, state.blob, True, base)

    def push(self, snapshot: Path) -> SyncReport:
        """Commit the snapshot on top of the remote's branch and push it (last writer
        wins: a push that lost a race is rebuilt on the new remote commit)."""
        for _ in range(PUSH_ATTEMPTS):
            state = self._remote_state()
            fetched = Fetched(self.location(), state.blob, False, (state.branch, state.commit))
            try:
                return self.push_if(snapshot, fetched)
            except SnapshotConflict:
                continue
        raise BackupError(f"{self.shown_remote} kept changing while pushing; try again")

    def push_if(self, snapshot: Path, fetched: Fetched) -> SyncReport:
        """Commit the snapshot on the fetched commit; push without force.

        A rejected push while the remote branch moved is a SnapshotConflict (another
        machine pushed: the engine merges its snapshot first); never a forced push.
        """
        branch, commit = fetched.base
        files = sorted(p for p in snapshot.iterdir() if p.is_file())
        self._ensure_repo()
        if commit is not None:
            # Local commits not on the remote are obsolete: the store they came from has
            # merged the remote snapshot, so this snapshot contains them.
            self.git.run(["checkout", "--quiet", "--force", "-B", branch, commit])
        else:
            self._start_branch(branch)
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
        if (commit is not None and not changed) or not self._has_commits():
            return SyncReport(
                self.name,
                skipped=len(files),
                message="nothing to push: the snapshot is unchanged",
                version=fetched.version,
            )
        self._push(branch, commit)
        head = self._head()[:12]
        return SyncReport(
            self.name,
            pushed=[f"{self.user}/{name}" for name in changed],
            skipped=len(files) - len(changed),
            message=f"pushed commit {head} to {self.shown_remote} ({branch})",
            version=self._blob("HEAD"),
        )

    def purge(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        """Rewrite this user's snapshot in every commit of the branch without the
        memories (``history.rewrite``), force-push the new history with a lease on the
        commit that was rewritten, and drop the old commits from the local repository.

        The remote keeps the old commits as unreachable objects until it collects its
        garbage (a hosted service may need its support to purge them), and every other
        clone keeps its own copy: the answer's ``warning`` says so."""
        state = self._remote_state()
        warning = (
            f"other clones of {self.shown_remote} keep the old history until they are "
            "deleted and cloned again, and the remote keeps the old commits as unreachable "
            "objects until its garbage collection (a hosted service may need a support "
            "request)"
        )
        if state.commit is None:
            return {"commits_rewritten": 0, "message": "the remote holds no history",
                    "warning": warning}  # fmt: skip
        done = history.rewrite(self.git, state.commit, f"{self.user}/{SNAPSHOT}", memory_ids)
        if done.tip != state.commit:
            self._force_push(state.branch, state.commit, done.tip)
        self.git.run(["checkout", "--quiet", "--force", "-B", state.branch, done.tip])
        self.git.run(["update-ref", f"refs/remotes/origin/{state.branch}", done.tip])
        history.forget_old_objects(self.git)
        log.warning("git backup history rewritten to purge memories", remote=self.shown_remote,
                    branch=state.branch, commits=done.commits, snapshots=done.scrubbed)  # fmt: skip
        return {
            "commits_rewritten": done.commits,
            "snapshots_scrubbed": done.scrubbed,
            "message": f"rewrote {done.commits} commits of {state.branch} on {self.shown_remote}",
            "warning": warning,
        }

    def _force_push(self, branch: str, old: str, new: str) -> None:
        """Replace the remote branch by ``new`` only if it still points at ``old``."""
        lease = f"--force-with-lease=refs/heads/{branch}:{old}"
        result = self.git.run(["push", "--quiet", lease, "origin", f"{new}:refs/heads/{branch}"],
                              check=False)  # fmt: skip
        if result.code != 0:
            raise BackupError(
                f"the purged history was not pushed to {self.shown_remote} ({branch}): "
                f"{self.git.describe(result)}. Another machine may have pushed meanwhile: "
                "run `smriti purge` again (the memory stays forgotten here)"
            )

    # -- remote ------------------------------------------------------------------------
    def _ls_remote(self) -> tuple[dict[str, str], str | None]:
        """The remote's branches (name → commit) and the branch its HEAD points at."""
        result = self.git.run(
            ["ls-remote", "--symref", self.remote], check=False, cwd=self.repo.parent
        )
        if result.code != 0:
            raise BackupError(
                f"cannot reach the git backup remote {self.shown_remote}: "
                f"{self.git.describe(result)}"
            )
        head: str | None = None
        heads: dict[str, str] = {}
        for line in result.stdout.splitlines():
            ref, _, name = line.partition("\t")
            if ref.startswith("ref: ") and name == "HEAD":
                head = ref[5:].removeprefix("refs/heads/")
            elif name.startswith("refs/heads/"):
                heads[name.removeprefix("refs/heads/")] = ref
        return heads, head

    def _remote_state(self) -> _State:
        """Fetch every remote branch and choose the one to restore from and push to."""
        heads, head = self._ls_remote()
        self._ensure_repo()
        configured = self.branch_setting
        if not heads:
            return _State(configured or self._default_branch(), None, None)
        self.git.run(
            ["fetch", "--quiet", "--prune", "origin", "+refs/heads/*:refs/remotes/origin/*"]
        )
        branch = configured or self._choose(sorted(heads), head)
        if branch not in heads:
            return _State(branch, None, None)
        tracking = f"refs/remotes/origin/{branch}"
        commit = self.git.run(["rev-parse", tracking]).stdout.strip()
        return _State(branch, commit, self._blob(tracking))

    def _choose(self, heads: list[str], head: str | None) -> str:
        """The branch holding this user's snapshot (the one pushed to), else the
        remote's default branch: HEAD, this repository's branch, main, master, first."""
        order = [b for b in (head, self._local_branch(), "main", "master", *heads) if b in heads]
        holding = [b for b in dict.fromkeys(order) if self._blob(f"refs/remotes/origin/{b}")]
        if len(holding) > 1:
            log.warning("several remote branches hold a snapshot; using the first",
                        branches=holding, chosen=holding[0], setting=BRANCH_ENV)  # fmt: skip
        return (holding or order)[0]

    def _blob(self, rev: str) -> str | None:
        """The blob id of this user's snapshot file at ``rev`` (None when absent)."""
        result = self.git.run(
            ["rev-parse", "--verify", "--quiet", f"{rev}:{self.user}/{SNAPSHOT}"], check=False
        )
        return result.stdout.strip() or None if result.code == 0 else None

    def _push(self, branch: str, base: str | None) -> None:
        args = ["push", "--quiet", "origin", f"HEAD:refs/heads/{branch}"]
        result = self.git.run(args, check=False)
        if result.code == 0:
            return
        now = self._ls_remote()[0].get(branch)
        if now != base:
            log.info("git push rejected: the remote moved; merging it first", branch=branch)
            raise SnapshotConflict(f"{self.shown_remote} ({branch}) changed since it was fetched")
        raise BackupError(
            f"git push to {self.shown_remote} ({branch}) failed: {self.git.describe(result)}"
        )

    # -- local repository --------------------------------------------------------------
    def _ensure_repo(self) -> None:
        if not (self.repo / ".git").is_dir():
            private_dir(self.repo)
            self.git.run(["init", "--quiet"])
        remotes = self.git.run(["remote"]).stdout.split()
        verb = "set-url" if "origin" in remotes else "add"
        self.git.run(["remote", verb, "origin", self.remote])
        if self.git.run(["config", "--get", "user.email"], check=False).code != 0:
            self.git.run(["config", "user.name", "Smriti"])
            self.git.run(["config", "user.email", "smriti@localhost"])

    def _start_branch(self, branch: str) -> None:
        if self._has_commits():
            self.git.run(["checkout", "--quiet", "-B", branch])
        else:
            self.git.run(["symbolic-ref", "HEAD", f"refs/heads/{branch}"])

    def _stage(self, files: list[Path]) -> list[str]:
        """Mirror the snapshot into ``{user}/`` and stage it; return changed file names."""
        dest = self.repo / self.user
        private_dir(dest)
        names = {f.name for f in files}
        for old in dest.iterdir():
            if old.is_file() and old.name not in names:
                old.unlink()
        for f in files:
            copy_private(f, dest / f.name)
        self.git.run(["add", "--all", "--", self.user])
        diff = self.git.run(["diff", "--cached", "--name-only", "--", self.user])
        return [Path(p).name for p in diff.stdout.splitlines() if p.strip()]

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
