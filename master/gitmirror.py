"""The master's own bare mirror of the watched repository: commit facts and first-parent order per branch.

Results name a commit; what the commit *is* (subject, author, date, where it sits on a branch, which tags
point at it) comes from this mirror, not from the worker. Every git call is an argv list with a timeout.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable, Iterable

from master.gitauth import GitCredentials
from master.redact import redact_text
from master.store import CommitInfo

GIT_TIMEOUT = 600
_FORMAT = "%H%x1f%P%x1f%aN <%aE>%x1f%at%x1f%ct%x1f%s%x1e"


class GitError(RuntimeError):
    """A git command failed; the message carries git's own words, every URL in them redacted."""


def git(
    args: list[str], cwd: Path | None = None, timeout: float = GIT_TIMEOUT, credentials: GitCredentials | None = None
) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C", **(credentials.env() if credentials else {}))
    auth = credentials.config_args() if credentials else []
    try:
        proc = subprocess.run(
            ["git", *auth, *args], cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args[:2])} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:  # redact before cutting: a cut URL would lose the scheme redact_text looks for
        raise GitError(f"git {' '.join(args[:2])} failed: {redact_text(proc.stderr.strip())[-500:]}")
    return proc.stdout


def check_reachable(url: str, timeout: float = 15, credentials: GitCredentials | None = None) -> str | None:
    """None when `git ls-remote` answers within `timeout` seconds, else a one-line reason."""
    try:
        git(["ls-remote", "--heads", url, "refs/heads/does-not-matter"], timeout=timeout, credentials=credentials)
    except GitError as e:
        return str(e)
    return None


def parse_log(text: str) -> list[CommitInfo]:
    commits = []
    for record in text.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        sha, parents, author, at, ct, subject = record.split("\x1f", 5)
        commits.append(CommitInfo(sha, subject, author, int(at), int(ct), tuple(parents.split())))
    return commits


class Mirror:
    """A bare mirror at `path` of the repository at `url`, fetched on demand."""

    def __init__(self, url: str, path: Path, credentials: GitCredentials | None = None) -> None:
        self.url = url
        self.path = path
        self.credentials = credentials

    def ensure(self) -> None:
        if not (self.path / "HEAD").exists():
            self.path.mkdir(parents=True, exist_ok=True)
            git(["init", "--bare", "--quiet", str(self.path)])

    def fetch(self) -> None:
        """Fetch all branches and tags (pruning deleted ones) from the repository."""
        self.ensure()
        git(
            ["fetch", "--quiet", "--prune", "--force", self.url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
            cwd=self.path,
            credentials=self.credentials,
        )

    def has_commit(self, sha: str) -> bool:
        self.ensure()
        try:
            git(["cat-file", "-e", f"{sha}^{{commit}}"], cwd=self.path, timeout=30)
        except GitError:
            return False
        return True

    def resolve(self, revision: str) -> str | None:
        """The full sha of the commit `revision` names here (tags peeled), or None when there is none."""
        self.ensure()
        try:
            out = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"],
                      cwd=self.path, timeout=30)
        except GitError:
            return None
        return out.strip() or None

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(branches, tags): name -> commit sha (annotated tags peeled to their commit)."""
        self.ensure()
        out = git(
            ["for-each-ref", "--format=%(refname)%09%(objectname)%09%(*objectname)", "refs/heads", "refs/tags"],
            cwd=self.path,
        )
        branches, tags = {}, {}
        for line in out.splitlines():
            ref, obj, peeled = (line.split("\t") + ["", ""])[:3]
            if ref.startswith("refs/heads/"):
                branches[ref[len("refs/heads/") :]] = obj
            elif ref.startswith("refs/tags/"):
                tags[ref[len("refs/tags/") :]] = peeled or obj
        return branches, tags

    def commit(self, sha: str) -> CommitInfo:
        commits = parse_log(git(["log", "-1", f"--format={_FORMAT}", sha, "--"], cwd=self.path))
        if not commits:
            raise GitError(f"commit {sha} is not in the mirror")
        return commits[0]

    def first_parent(self, head: str, since: str | None = None) -> list[CommitInfo]:
        """Commits on head's first-parent chain, oldest first; only those after `since` when given."""
        rng = [head] if since is None else [f"{since}..{head}"]
        out = git(["log", "--first-parent", "--reverse", f"--format={_FORMAT}", *rng, "--"], cwd=self.path)
        return parse_log(out)


def sync_branch(
    mirror: Mirror,
    head_sha: str,
    stored_head: tuple[int, str] | None,
    append: Callable[[list[CommitInfo], int], None],
    reset: Callable[[], None],
) -> int:
    """Bring a branch's stored first-parent order up to `head_sha`; returns how many commits were added.

    Incremental when the stored head is still on the chain (the common case: a few new commits); a rewritten
    branch is reset and rebuilt.
    """
    if stored_head is not None:
        position, sha = stored_head
        if sha == head_sha:
            return 0
        new = mirror.first_parent(head_sha, since=sha)
        if new and new[0].parents and new[0].parents[0] == sha:
            append(new, position + 1)
            return len(new)
        reset()
    chain = mirror.first_parent(head_sha)
    append(chain, 0)
    return len(chain)


def watched(names: Iterable[str], match: Callable[[str], bool], prefix: str) -> list[str]:
    return sorted(n for n in names if match(prefix + n))
