"""Rewriting a branch's history so that no commit's snapshot holds purged memories.

``rewrite`` walks every commit reachable from the branch tip, oldest first, and builds
a copy of each with one file (this user's ``memory.jsonl``) scrubbed of the purged
memories (``smriti.portable.scrub``), using plumbing only: ``cat-file`` to read the
blob, ``hash-object -w`` for the scrubbed one, a scratch index (``read-tree``,
``update-index --cacheinfo``, ``write-tree``) for the new tree, and ``commit-tree``
with the original author, committer, dates and message. A commit whose tree and
parents are unchanged keeps its id, so the rewrite of a history that never held the
memories changes nothing. Other users' files on a shared remote keep their blobs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from smriti import scrub
from smriti_backup_git.git import Git

#: ``git log`` fields of a commit, NUL-separated (dates raw: seconds and zone).
_META = "%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd"
_META_ENV = (
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
)  # fmt: skip


@dataclass(slots=True)
class Rewrite:
    """The rewritten tip and what changed."""

    tip: str
    commits: int = 0
    #: Commits whose snapshot held a purged memory (and were rebuilt without it).
    scrubbed: int = 0
    #: Old snapshot blob → scrubbed blob (each distinct snapshot is scrubbed once).
    blobs: dict[str, str] = field(default_factory=dict)


def rewrite(git: Git, tip: str, path: str, ids: Iterable[str]) -> Rewrite:
    """The history of ``tip`` with ``path`` scrubbed of ``ids`` in every commit."""
    purged = set(ids)
    out = Rewrite(tip)
    mapped: dict[str, str] = {}
    listing = git.run(["rev-list", "--topo-order", "--reverse", "--parents", tip]).stdout
    with tempfile.TemporaryDirectory(prefix="smriti-purge-", dir=git.cwd / ".git") as tmp:
        scratch = Path(tmp)
        for line in listing.splitlines():
            sha, *parents = line.split()
            blob = _blob(git, sha, path)
            new_blob = _scrubbed(git, blob, purged, out, scratch) if blob else None
            new_parents = [mapped[p] for p in parents]
            if new_blob is None and new_parents == parents:
                mapped[sha] = sha
                continue
            tree = git.run(["rev-parse", f"{sha}^{{tree}}"]).stdout.strip()
            if new_blob is not None:
                tree = _tree_with(git, tree, path, new_blob, scratch)
                out.scrubbed += 1
            mapped[sha] = _commit(git, sha, tree, new_parents, scratch)
            out.commits += 1
    out.tip = mapped[tip]
    return out


def _blob(git: Git, rev: str, path: str) -> str | None:
    done = git.run(["rev-parse", "--verify", "--quiet", f"{rev}:{path}"], check=False)
    return done.stdout.strip() or None if done.code == 0 else None


def _scrubbed(git: Git, blob: str, ids: set[str], out: Rewrite, scratch: Path) -> str | None:
    """The id of ``blob`` scrubbed (None when it holds none of ``ids``)."""
    if blob in out.blobs:
        return out.blobs[blob] or None
    text = git.run(["cat-file", "blob", blob]).stdout
    cleaned = scrub(text, ids)
    new = ""
    if cleaned is not None:
        file = scratch / "snapshot"
        file.write_text(cleaned, encoding="utf-8")
        new = git.run(["hash-object", "-w", "--no-filters", "--", str(file)]).stdout.strip()
        file.unlink()
    out.blobs[blob] = new
    return new or None


def _tree_with(git: Git, tree: str, path: str, blob: str, scratch: Path) -> str:
    """``tree`` with ``path`` pointing at ``blob`` (through a scratch index)."""
    index = Git(git.cwd, git.timeout, {**git.env, "GIT_INDEX_FILE": str(scratch / "index")})
    index.run(["read-tree", tree])
    index.run(["update-index", "--cacheinfo", f"100644,{blob},{path}"])
    return index.run(["write-tree"]).stdout.strip()


def _commit(git: Git, sha: str, tree: str, parents: list[str], scratch: Path) -> str:
    """A copy of commit ``sha`` with ``tree`` and ``parents``: same people, dates, message."""
    meta = git.run(["log", "-1", "--date=raw", f"--format={_META}", sha]).stdout
    values = meta.rstrip("\n").split("\x00")
    message = scratch / "message"
    message.write_text(git.run(["log", "-1", "--format=%B", sha]).stdout, encoding="utf-8")
    author = Git(git.cwd, git.timeout, {**git.env, **dict(zip(_META_ENV, values, strict=True))})
    args = ["commit-tree", tree, "-F", str(message)]
    for parent in parents:
        args += ["-p", parent]
    return author.run(args).stdout.strip()


def forget_old_objects(git: Git) -> None:
    """Drop every unreachable object from the local repository (the old commits and
    snapshots): no reflog entry or loose object may keep them."""
    git.run(["reflog", "expire", "--expire=now", "--all"])
    git.run(["gc", "--quiet", "--prune=now"])
