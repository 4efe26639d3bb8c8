"""The farm's GitPoller: a poll costs a fixed handful of git processes, however many refs are watched.

Buildbot 4.3's GitPoller.poll runs, per watched ref and per poll, `git rev-parse` and `git log` (the log with every
watched ref as a negative revision), whether the ref moved or not, and fetches every watched ref each time. With
postgres.git's release tags watched that is hundreds of git processes every interval for nothing new
(docs/scale.md). This subclass reads the refs' commits from the same `git ls-remote` Buildbot already runs and does
the rest only for refs that moved: nothing new is `--version`, `init` and `ls-remote`; a moved ref adds one fetch,
one for-each-ref and Buildbot's own per-change processing (`_process_changes`, unchanged). What Buildbot records
is the same: the state `lastRev` (ref -> the commit or tag object it pointed at), the changes, their order.

It leans on GitPoller internals (`_dovccmd`, `_tracker_ref`, `_process_changes`, `_git_auth`): pinned by
constraints.txt (buildbot==4.3.0); tests/integration/test_history_scale.py runs it in a real master.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any, cast

from buildbot.changes import gitpoller
from buildbot.util import private_tempdir
from twisted.internet import defer
from twisted.python import log

_LINE = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})\t(refs/\S+)$")


def parse_ls_remote(text: str) -> dict[str, str]:
    """ref -> object name from `git ls-remote --refs` output, in git's order; lines that are not that are skipped."""
    refs = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            refs[m.group(2)] = m.group(1)
    return refs


def watched_refs(listing: str, match: Callable[[str], bool]) -> dict[str, str]:
    """The refs of an `ls-remote --refs` listing that `match` watches, ref -> object.

    An all-zero object is a broken ref (upload-pack advertises one git could not read): fetching it would fail the
    one fetch of every moved ref, so it is left out, as the master's mirror leaves it out.
    """
    return {ref: sha for ref, sha in parse_ls_remote(listing).items() if sha.strip("0") and match(ref)}


def moved_refs(advertised: dict[str, str], last: dict[str, str]) -> list[str]:
    """The advertised refs whose object differs from the last poll's (new refs included), in advertised order."""
    return [ref for ref, sha in advertised.items() if last.get(ref) != sha]


class FarmGitPoller(gitpoller.GitPoller):
    """GitPoller for a callable ref filter (the farm's) that skips the per-ref work for refs that did not move."""

    def checkConfig(self, repourl: str, **kwargs: Any) -> None:  # type: ignore[override]
        if not callable(kwargs.get("branches")):
            raise ValueError("FarmGitPoller needs a callable ref filter (branches=settings.ref_matches)")
        super().checkConfig(repourl, **kwargs)

    @defer.inlineCallbacks
    def poll(self):  # noqa: ANN201 - Buildbot's signature
        yield self._checkGitFeatures()
        try:
            yield self._dovccmd("init", ["--bare", self.workdir])
        except gitpoller.GitError as e:
            log.msg(e.args[0])
            return
        tmp_dir = (
            private_tempdir.PrivateTemporaryDirectory(dir=self.workdir, prefix=".buildbot-ssh")
            if self._git_auth.is_auth_needed
            else contextlib.nullcontext()
        )
        with tmp_dir as tmp_path:
            yield self._git_auth.download_auth_files_if_needed(cast(str, tmp_path))
            listing = yield self._dovccmd("ls-remote", ["--refs", self.repourl], auth_files_path=tmp_path)
            advertised = watched_refs(listing, self.branches)
            if self.lastRev is None:
                self.lastRev = yield self.getState("lastRev", {})
            if not advertised:
                if self.lastRev:  # every watched ref was deleted: the state forgets them as it forgets one deleted ref
                    self.lastRev = {}
                    yield self.setState("lastRev", self.lastRev)
                return
            moved = moved_refs(advertised, self.lastRev)
            if not moved and set(self.lastRev) == set(advertised):
                return  # nothing new: no fetch, no log, no state write
            if self.poll_should_exit():
                return
            if moved:
                refspecs = [f"+{ref}:{self._tracker_ref(self.repourl, ref)}" for ref in moved]
                try:
                    yield self._dovccmd(
                        "fetch",
                        ["--progress", self.repourl, *refspecs, "--"],
                        path=self.workdir,
                        auth_files_path=tmp_path,
                    )
                except gitpoller.GitError as e:
                    log.msg(e.args[0])
                    return
        # What was fetched (the ref may have moved again since ls-remote): one for-each-ref for every tracker ref.
        fetched = {}
        if moved:
            listing = yield self._dovccmd(
                "for-each-ref", ["--format=%(objectname)%09%(refname)", "refs/buildbot/"], path=self.workdir
            )
            fetched = parse_ls_remote(listing)
        revs = {ref: sha for ref, sha in self.lastRev.items() if ref in advertised and ref not in moved}
        log.msg(f'gitpoller: processing changes from "{self.repourl}" ({len(moved)} of {len(advertised)} refs moved)')
        for ref in moved:
            rev = fetched.get(self._tracker_ref(self.repourl, ref))
            if rev is None:
                log.msg(f"gitpoller: {ref} was not fetched; tried again next poll")
                continue
            try:
                if self.poll_should_exit():  # pragma: no cover
                    break
                revs[ref] = rev
                yield self._process_changes(rev, ref)
            except Exception:
                log.err(_why=f"trying to poll branch {ref} of {self.repourl}")
        self.lastRev = revs
        yield self.setState("lastRev", self.lastRev)
