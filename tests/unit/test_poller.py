"""The farm's GitPoller reads each watched ref's commit from `git ls-remote` and does work only for refs that moved."""

from __future__ import annotations

from master.poller import moved_refs, parse_ls_remote, watched_refs


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
