"""The farm's GitPoller reads each watched ref's commit from `git ls-remote` and does work only for refs that moved."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from master.poller import FarmGitPoller, moved_refs, parse_ls_remote, watched_refs


def test_poller_reads_commits_from_ls_remote_and_skips_refs_that_did_not_move():
    sha1, sha2 = "1" * 40, "2" * 40
    text = f"{sha1}\trefs/heads/master\n{sha2}\trefs/tags/REL_17_5\nnot a line\n{sha1}\trefs/heads/odd name\n"
    refs = parse_ls_remote(text)
    assert refs == {"refs/heads/master": sha1, "refs/tags/REL_17_5": sha2}
    assert moved_refs(refs, {"refs/heads/master": sha1, "refs/tags/REL_17_5": sha2}) == []
    assert moved_refs(refs, {"refs/heads/master": sha2}) == ["refs/heads/master", "refs/tags/REL_17_5"]


def test_a_broken_ref_or_an_unwatched_one_is_never_fetched():
    good, broken = "3" * 40, "0" * 40
    text = f"{good}\trefs/heads/master\n{broken}\trefs/heads/REL_17_STABLE\n{good}\trefs/heads/wip\n"
    assert watched_refs(text, lambda ref: not ref.endswith("/wip")) == {"refs/heads/master": good}


def _poller(listing: str, last: dict[str, str]) -> tuple[FarmGitPoller, list[tuple[str, Any]], list[str]]:
    """A FarmGitPoller whose git calls and state are stubs: `git ls-remote` prints `listing`; returns the poller, the
    state writes and the git commands run."""
    poller = object.__new__(FarmGitPoller)  # no Buildbot service machinery: poll() is what is tested
    writes: list[tuple[str, Any]] = []
    commands: list[str] = []

    def dovccmd(command: str, args: list[str], **kw: Any) -> defer.Deferred:
        commands.append(command)
        return defer.succeed(listing if command == "ls-remote" else "")

    def set_state(key: str, value: Any) -> defer.Deferred:
        writes.append((key, dict(value)))
        return defer.succeed(None)

    poller.__dict__.update(
        repourl="file:///repo.git",
        workdir="/nonexistent",
        branches=lambda ref: ref.startswith("refs/heads/"),
        lastRev=dict(last),
        _checkGitFeatures=lambda: defer.succeed(None),
        _dovccmd=dovccmd,
        _git_auth=SimpleNamespace(is_auth_needed=False, download_auth_files_if_needed=lambda _: defer.succeed(None)),
        setState=set_state,
        getState=lambda key, default: defer.succeed(default),
    )
    return poller, writes, commands


def test_when_every_watched_ref_is_deleted_the_state_forgets_them():
    sha = "4" * 40
    # only an unwatched ref (a tag) is left: no watched ref is advertised
    poller, writes, commands = _poller(f"{sha}\trefs/tags/v1\n", {"refs/heads/master": sha, "refs/heads/b": sha})
    done = poller.poll()
    assert done.called and not isinstance(done.result, Failure)
    assert poller.lastRev == {}
    assert writes == [("lastRev", {})]
    assert "fetch" not in commands
    # nothing left and nothing known: no state write at all
    poller, writes, _ = _poller("", {})
    poller.poll()
    assert poller.lastRev == {} and writes == []
