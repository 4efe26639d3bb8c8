"""The master's own bare mirror of the watched repository: commit facts and first-parent order per branch.

Results name a commit; what the commit *is* (subject, author, date, where it sits on a branch, which tags
point at it) comes from this mirror, not from the worker. Every git call is an argv list with a timeout, and
revisions follow `--end-of-options` so none can be read as an option.

Commit text is written by whoever can push: it may hold any byte but NUL (git refuses NUL in messages and
names), so git's output is read in NUL-separated formats, and one record that does not parse is logged and
skipped instead of stopping every later ingest.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from master.gitauth import GitCredentials
from master.redact import redact_text
from master.refnames import ref_problem
from master.store import CommitInfo
from master.textsafe import safe_link

GIT_TIMEOUT = 600
# With -z, records end in NUL; fields are NUL-separated too, so a record is exactly _FIELDS fields and no commit
# text can shift them. The subject is last; %s is the first paragraph of the message joined into one line. The
# `Discussion:` trailers (PostgreSQL's link to the mailing-list thread) are read by git itself, space-separated:
# cheaper than reading every message body here (docs/scale.md).
_FORMAT = (
    "%H%x00%P%x00%aN <%aE>%x00%at%x00%ct%x00%cN <%cE>%x00%(trailers:key=Discussion,valueonly,separator=%x20)%x00%s"
)
_FIELDS = 8
MAX_LINKS = 5
MAX_MESSAGE = 20_000  # characters of a commit message the commit page shows (PostgreSQL's longest are ~10,000)
_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
log = logging.getLogger("perffarm.gitmirror")


class GitError(RuntimeError):
    """A git command failed; the message carries git's own words, every URL in them redacted."""


_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")


def git(
    args: list[str],
    cwd: Path | None = None,
    timeout: float = GIT_TIMEOUT,
    credentials: GitCredentials | None = None,
    input: str | None = None,
) -> str:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C", **(credentials.env() if credentials else {}))
    auth = credentials.config_args() if credentials else []
    try:  # UTF-8 whatever the locale; bytes that are not UTF-8 (git keeps them in commit text) become U+FFFD
        proc = subprocess.run(
            ["git", *auth, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            input=input,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args[:2])} did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:  # redact before cutting: a cut URL would lose the scheme redact_text looks for
        raise GitError(f"git {' '.join(args[:2])} failed: {redact_text(proc.stderr.strip())[-500:]}")
    return proc.stdout


def check_reachable(url: str, timeout: float = 15, credentials: GitCredentials | None = None) -> str | None:
    """None when `git ls-remote` answers within `timeout` seconds, else a one-line reason."""
    try:
        git(
            ["ls-remote", "--heads", "--end-of-options", url, "refs/heads/does-not-matter"],
            timeout=timeout,
            credentials=credentials,
        )
    except GitError as e:
        return str(e)
    return None


def _timestamp(text: str, what: str, sha: str) -> int:
    try:
        return int(text)
    except ValueError:
        log.warning("commit %s: %s %r is not a unix time; stored as 0", sha, what, text[:40])
        return 0


def discussion_links(text: str) -> tuple[str, ...]:
    """The `Discussion:` values that are plain https links (at most MAX_LINKS, in order, no repeats); anything
    else a commit message calls a discussion is dropped, since it would be shown as a link to every reader."""
    out: list[str] = []
    for value in text.split():
        value = value.strip("<>")  # "Discussion: <https://...>" is written too
        if safe_link(value) and value not in out:
            out.append(value)
    return tuple(out[:MAX_LINKS])


def parse_log(text: str) -> list[CommitInfo]:
    """Commits from `git log -z --format=_FORMAT` output; a record that cannot be a commit is logged and skipped."""
    if not text:
        return []
    fields = text.split("\0")
    if text.endswith("\0"):
        fields.pop()  # what follows the last record's terminator
    commits = []
    for i in range(0, len(fields), _FIELDS):
        record = fields[i : i + _FIELDS]
        if len(record) < _FIELDS:
            log.warning("git log output ends in an incomplete record (%d of %d fields): skipped", len(record), _FIELDS)
            break
        sha, parents, author, at, ct, committer, discussion, subject = record
        if not _SHA_RE.match(sha):
            log.warning("git log record %d does not start with a commit sha (%r): skipped", i // _FIELDS, sha[:80])
            continue
        parent_list = tuple(p for p in parents.split() if _SHA_RE.match(p))
        if len(parent_list) != len(parents.split()):
            log.warning("commit %s: parents %r are not all commit shas; kept those that are", sha, parents[:200])
        commits.append(
            CommitInfo(
                sha,
                subject,
                author,
                _timestamp(at, "author date", sha),
                _timestamp(ct, "commit date", sha),
                parent_list,
                committer,
                discussion_links(discussion),
            )
        )
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
        """Fetch all branches and tags (pruning deleted ones) from the repository.

        One glob fetch in the common case. A single broken ref in the repository (a name git would not create, which
        its upload-pack advertises as 0000...) fails that whole fetch, so then the refs are listed, the broken ones
        left out, and the rest fetched by name: one odd ref never stops the mirror for every other branch.
        """
        self.ensure()
        try:
            git(
                [
                    "fetch",
                    "--quiet",
                    "--prune",
                    "--force",
                    "--end-of-options",
                    self.url,
                    "+refs/heads/*:refs/heads/*",
                    "+refs/tags/*:refs/tags/*",
                ],
                cwd=self.path,
                credentials=self.credentials,
            )
        except GitError as first:
            try:
                self._fetch_by_name()
            except GitError as e:
                raise GitError(f"{first}; fetching ref by ref failed too: {e}") from None

    def _fetch_by_name(self) -> None:
        out = git(
            ["ls-remote", "--refs", "--end-of-options", self.url, "refs/heads/*", "refs/tags/*"],
            credentials=self.credentials,
        )
        wanted = set()
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            name = ref.split("/", 2)[-1]
            if ref.startswith(("refs/heads/", "refs/tags/")) and sha.strip("0") and ref_problem(name) is None:
                wanted.add(ref)
        local = set(git(["for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags"], cwd=self.path).split("\n"))
        stale = sorted(r for r in local if r and r not in wanted)
        if stale:  # the prune of the glob fetch
            git(["update-ref", "--stdin"], cwd=self.path, input="".join(f"delete {r}\n" for r in stale))
        refs = sorted(wanted)
        for i in range(0, len(refs), 200):
            git(
                [
                    "fetch",
                    "--quiet",
                    "--force",
                    "--end-of-options",
                    self.url,
                    *(f"+{r}:{r}" for r in refs[i : i + 200]),
                ],
                cwd=self.path,
                credentials=self.credentials,
            )

    def has_commit(self, sha: str) -> bool:
        self.ensure()
        try:
            git(["cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}"], cwd=self.path, timeout=30)
        except GitError:
            return False
        return True

    def resolve(self, revision: str) -> str | None:
        """The full sha of the commit `revision` names here (tags peeled), or None when there is none."""
        self.ensure()
        try:
            out = git(
                ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"],
                cwd=self.path,
                timeout=30,
            )
        except GitError:
            return None
        return out.strip() or None

    def is_ancestor(self, ancestor: str, sha: str) -> bool:
        """Whether commit `ancestor` is `sha` or one of its ancestors (both full shas of this mirror)."""
        if not (_FULL_SHA.match(ancestor) and _FULL_SHA.match(sha)):
            raise ValueError(f"is_ancestor takes full shas, got {ancestor!r} and {sha!r}")
        try:
            git(["merge-base", "--is-ancestor", ancestor, sha], cwd=self.path, timeout=60)
        except GitError:
            return False
        return True

    def patch_problem(self, sha: str, patch: str) -> str | None:
        """Why `patch` does not apply to commit `sha` (git apply --check against a private index of its tree: no
        work tree, nothing written to the mirror), or None when it applies."""
        if not _FULL_SHA.match(sha):
            raise ValueError(f"patch_problem takes a full sha, got {sha!r}")
        with tempfile.TemporaryDirectory(prefix="perffarm-apply-") as tmp:
            env = dict(os.environ, GIT_INDEX_FILE=str(Path(tmp) / "index"), LC_ALL="C")
            read = subprocess.run(
                ["git", "read-tree", sha], cwd=self.path, env=env, capture_output=True, text=True, timeout=120
            )
            if read.returncode != 0:
                return f"cannot read the tree of {sha[:12]}: {read.stderr.strip()[-300:]}"
            # --cached: the index, not a work tree; paths outside the tree and absolute ones are refused by git apply
            proc = subprocess.run(
                ["git", "apply", "--cached", "--check", "-"],
                cwd=self.path,
                env=env,
                input=patch,
                capture_output=True,
                text=True,
                timeout=120,
            )
        if proc.returncode == 0:
            return None
        return " ".join(proc.stderr.split())[-400:] or f"git apply exited with status {proc.returncode}"

    def refs(self) -> tuple[dict[str, str], dict[str, str]]:
        """(branches, tags): name -> commit sha (annotated tags peeled to their commit)."""
        self.ensure()
        # NUL between fields (ref names cannot hold NUL, tabs or newlines, but NUL needs no such argument)
        out = git(
            [
                "for-each-ref",
                "--format=%(refname)%00%(objectname)%00%(*objectname)",
                "--end-of-options",
                "refs/heads",
                "refs/tags",
            ],
            cwd=self.path,
        )
        branches, tags = {}, {}
        for line in out.split("\n"):
            if not line:
                continue
            parts = line.split("\0")
            if len(parts) != 3 or not _SHA_RE.match(parts[1]) or (parts[2] and not _SHA_RE.match(parts[2])):
                log.warning("git for-each-ref line %r is not 'ref NUL object NUL peeled': skipped", line[:200])
                continue
            ref, obj, peeled = parts
            if ref.startswith("refs/heads/"):
                branches[ref[len("refs/heads/") :]] = obj
            elif ref.startswith("refs/tags/"):
                tags[ref[len("refs/tags/") :]] = peeled or obj
        return branches, tags

    def commit(self, sha: str) -> CommitInfo:
        out = git(["log", "-z", "-1", f"--format={_FORMAT}", "--end-of-options", sha, "--"], cwd=self.path)
        commits = parse_log(out)
        if not commits:
            raise GitError(f"commit {sha} is not in the mirror (or git's record of it could not be read)")
        return commits[0]

    def message(self, sha: str) -> str:
        """The commit's message after its subject (`%b`: the body, paragraphs as written), at most MAX_MESSAGE
        characters (a longer one is cut and says so); trailing blank lines dropped."""
        body = git(["log", "-1", "--format=%b", "--end-of-options", sha, "--"], cwd=self.path).rstrip()
        if len(body) > MAX_MESSAGE:
            body = body[:MAX_MESSAGE] + f"\n\n[… the message is cut here: it is longer than {MAX_MESSAGE:,} characters]"
        return body

    def first_parent(self, head: str, since: str | None = None, exclude: Sequence[str] = ()) -> list[CommitInfo]:
        """Commits on head's first-parent chain, oldest first; only those after `since` when given, and none
        reachable from a commit in `exclude` (full shas)."""
        bad = [e for e in exclude if not _SHA_RE.match(e)]
        if bad:
            raise ValueError(f"first_parent excludes full shas only, got {bad[0]!r}")
        rng = [head] if since is None else [f"{since}..{head}"]
        rng += [f"^{e}" for e in exclude]
        out = git(
            ["log", "-z", "--first-parent", "--reverse", f"--format={_FORMAT}", "--end-of-options", *rng, "--"],
            cwd=self.path,
        )
        return parse_log(out)


@dataclass(frozen=True)
class StoredOrders:
    """What the store already orders, so that a branch new to it copies the first-parent prefix it shares with a
    stored branch (a stable branch shares all of master's history before it forked) instead of walking all of
    history: postgres.git's branches are ~60,000 commits deep, its stable branches a few thousand past the fork."""

    heads: Sequence[str]  # head shas of stored branches (full shas)
    locate: Callable[[str], tuple[str, int] | None]  # sha -> (stored branch, its position there), or None
    copy: Callable[[str, int], None]  # (stored branch, last position): take its positions 0..last as ours


def sync_branch(
    mirror: Mirror,
    head_sha: str,
    stored_head: tuple[int, str] | None,
    append: Callable[[list[CommitInfo], int], None],
    reset: Callable[[], None],
    orders: StoredOrders | None = None,
) -> int:
    """Bring a branch's stored first-parent order up to `head_sha`; returns how many commits were added.

    Incremental when the stored head is still on the chain (the common case: a few new commits); a rewritten
    branch is reset and rebuilt. A branch with no stored order starts from the first-parent prefix it shares with
    a stored branch (`orders`) when its chain reaches one: only the commits past the fork are read from git.
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
    if orders is not None and orders.heads:
        # The chain's commits that no stored branch reaches, then the commit they fork from: if that one is on a
        # stored branch's first-parent order at position p, our positions 0..p are that branch's 0..p.
        new = mirror.first_parent(head_sha, exclude=orders.heads)
        fork = head_sha if not new else (new[0].parents[0] if new[0].parents else None)
        where = orders.locate(fork) if fork else None
        if where is not None:
            branch, last = where
            orders.copy(branch, last)
            append(new, last + 1)
            return last + 1 + len(new)
    chain = mirror.first_parent(head_sha)
    append(chain, 0)
    return len(chain)


def watched(names: Iterable[str], match: Callable[[str], bool], prefix: str) -> list[str]:
    return sorted(n for n in names if match(prefix + n))
