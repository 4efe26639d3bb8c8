"""The master's mirror reads git output that commit text cannot confuse: real repositories with hostile commits."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from master import gitmirror, ingest, store
from master.settings import load_settings
from tests.harness import GitRepo, make_repo
from tests.unit.test_result_schema import good

# Everything the old \x1e/\x1f-separated format could trip on, plus terminal and bidi controls.
HOSTILE_SUBJECT = "fix\x1eparser\x1fagain \x1b[31mred\x1b[0m \u202eevil\u202c \u2066iso\u2069 bell\x07"
HOSTILE_AUTHOR = "Mal\x1flory \x1e\u202eX"


def hostile_commit(repo: GitRepo, subject: bytes | str, author: str = HOSTILE_AUTHOR, name: str = "f") -> str:
    """Commit with `subject` as the message's raw bytes and `author` as the author name (git keeps both)."""
    (repo.path / name).write_text(subject if isinstance(subject, str) else subject.hex())
    repo.git("add", name)
    msg = repo.path.parent / "msg"
    msg.write_bytes(subject if isinstance(subject, bytes) else subject.encode())
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME=author, GIT_AUTHOR_EMAIL="m@example.org")
    subprocess.run(
        ["git", "commit", "--quiet", "--cleanup=verbatim", "-F", str(msg)],
        cwd=repo.path,
        env=env,
        check=True,
        capture_output=True,
    )
    return repo.head()


@pytest.fixture
def env(tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    return repo, settings


def result_for(sha: str) -> dict:
    doc = good()
    doc["commit"] = {"sha": sha, "ref": "master"}
    return doc


def ingest_one(settings, sha: str, build_id: int) -> ingest.IngestOutcome:
    path = settings.incoming_dir / f"b-{build_id}.json"
    path.write_text(json.dumps(result_for(sha)))
    ctx = store.RunContext(builder="fixture@local", worker="local", source="poll", build_id=build_id, got_revision=sha)
    return ingest.ingest_file(settings, path, ctx, "fixture")


def test_hostile_commit_text_is_read_back_exactly(tmp_path):
    repo = make_repo(tmp_path / "repo")
    sha = hostile_commit(repo, HOSTILE_SUBJECT)
    mirror = gitmirror.Mirror(str(repo.path), tmp_path / "mirror")
    mirror.fetch()
    info = mirror.commit(sha)
    assert info.sha == sha and info.subject == HOSTILE_SUBJECT
    assert info.author == HOSTILE_AUTHOR + " <m@example.org>"
    assert info.parents == (repo.git("rev-parse", "HEAD~1"),)
    chain = mirror.first_parent(sha)
    assert [c.sha for c in chain] == [repo.git("rev-parse", "HEAD~1"), sha]
    assert chain[-1].subject == HOSTILE_SUBJECT


def raw_commit(repo: GitRepo, author: bytes, message: bytes) -> str:
    """Write a commit object byte for byte (`git commit` would re-encode invalid UTF-8 as Latin-1) onto HEAD."""
    tree, parent = repo.git("rev-parse", "HEAD^{tree}"), repo.head()
    body = (
        f"tree {tree}\nparent {parent}\n".encode() + b"author " + author + b" <e@x> 1700000000 +0000\n"
        b"committer C <c@x> 1700000001 +0000\n\n" + message
    )
    sha = (
        subprocess.run(
            ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
            cwd=repo.path,
            input=body,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .strip()
    )
    repo.git("update-ref", "HEAD", sha)
    return sha


def test_invalid_utf8_in_commit_text_is_replaced_not_fatal(tmp_path):
    repo = make_repo(tmp_path / "repo")
    sha = raw_commit(repo, b"Ev\xffil\x1f", b"bad \xff\xfe bytes\x1e \xc3\n\nbody \xff\n")
    mirror = gitmirror.Mirror(str(repo.path), tmp_path / "mirror")
    mirror.fetch()
    info = mirror.commit(sha)
    assert info.subject == "bad \ufffd\ufffd bytes\x1e \ufffd"
    assert info.author == "Ev\ufffdil\x1f <e@x>"
    assert (info.authored_at, info.committed_at) == (1700000000, 1700000001)
    info.subject.encode("utf-8")  # storable: no surrogates
    assert [c.sha for c in mirror.first_parent(sha)][-1] == sha


def test_a_commits_message_body_is_read_as_written_and_a_huge_one_is_cut(tmp_path):
    """The commit page's full message: the body after the subject, paragraphs, tabs and invalid bytes as read."""
    repo = make_repo(tmp_path / "repo")
    small = raw_commit(repo, b"A", b"subject line\n\nfirst \xff paragraph\n\tindented\n\nsecond\n\n\n")
    huge = raw_commit(repo, b"A", b"big\n\n" + b"x" * (gitmirror.MAX_MESSAGE + 5000) + b"\n")
    mirror = gitmirror.Mirror(str(repo.path), tmp_path / "mirror")
    mirror.fetch()
    assert mirror.message(small) == "first \ufffd paragraph\n\tindented\n\nsecond"
    assert mirror.message(repo.git("rev-parse", "HEAD~2")) == ""  # the initial commit: a subject alone
    cut = mirror.message(huge)
    assert cut.startswith("x" * gitmirror.MAX_MESSAGE + "\n\n[") and "cut here" in cut
    assert len(cut) < gitmirror.MAX_MESSAGE + 100


def test_an_empty_message_is_an_empty_subject(tmp_path):
    repo = make_repo(tmp_path / "repo")
    repo.git("commit", "--quiet", "--allow-empty", "--allow-empty-message", "-m", "")
    mirror = gitmirror.Mirror(str(repo.path), tmp_path / "mirror")
    mirror.fetch()
    chain = mirror.first_parent(repo.head())
    assert [(c.sha, c.subject) for c in chain] == [
        (repo.git("rev-parse", "HEAD~1"), "initial commit"),
        (repo.head(), ""),
    ]
    assert gitmirror.check_reachable(str(repo.path)) is None
    assert "does not appear to be a git repository" in gitmirror.check_reachable(str(tmp_path / "nothing"))


def test_one_hostile_commit_does_not_stop_ingest_on_any_branch(env):
    # A \x1e in a subject on a watched branch made every later ingest, on every branch, fail with ValueError.
    repo, settings = env
    base = repo.head()
    repo.git("checkout", "--quiet", "-b", "REL_17_STABLE")
    evil = hostile_commit(repo, HOSTILE_SUBJECT)
    repo.git("checkout", "--quiet", "master")
    normal = repo.bench_commit("a later, normal commit", 2000)
    out = ingest_one(settings, normal, 1)
    assert out.status == "ok"
    conn = store.connect(settings.results_db)
    row = conn.execute("SELECT subject, author FROM commits WHERE sha = ?", (evil,)).fetchone()
    assert tuple(row) == (HOSTILE_SUBJECT, HOSTILE_AUTHOR + " <m@example.org>")
    order = [
        r[0] for r in conn.execute("SELECT sha FROM branch_commits WHERE branch = 'REL_17_STABLE' ORDER BY position")
    ]
    assert order == [base, evil]
    # and the hostile commit itself is measured and stored like any other
    assert ingest_one(settings, evil, 2).status == "ok"
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


def test_parse_log_keeps_good_records_around_an_odd_one(caplog):
    good_a = "a" * 40 + "\0\0A <a@x>\x001\x002\0A <a@x>\0\0first"
    odd = "not-a-sha\0\0B <b@x>\x003\x004\0B <b@x>\0\0second"
    bad_dates = "b" * 40 + "\0" + "a" * 40 + "\0C <c@x>\0x\0\0C <c@x>\0\0third"
    good_d = "c" * 40 + "\0" + "b" * 40 + "\0D <d@x>\x005\x006\0E <e@x>\0https://postgr.es/m/1@x\0sub\x1ejec\x1ft"
    text = "\0".join([good_a, odd, bad_dates, good_d]) + "\0"
    got = gitmirror.parse_log(text)
    assert [c.sha for c in got] == ["a" * 40, "b" * 40, "c" * 40]
    assert got[1].authored_at == 0 and got[1].committed_at == 0 and got[1].subject == "third"
    assert got[2].subject == "sub\x1ejec\x1ft" and got[2].parents == ("b" * 40,)
    assert got[2].committer == "E <e@x>" and got[2].discussion == ("https://postgr.es/m/1@x",)
    assert "not-a-sha" in caplog.text  # the skipped record is logged with its reason


def test_a_truncated_record_is_skipped_not_fatal(caplog):
    text = "a" * 40 + "\0\0A <a@x>\x001\x002\0A <a@x>\0\0first\0" + "b" * 40 + "\0" + "a" * 40 + "\0"
    assert [c.sha for c in gitmirror.parse_log(text)] == ["a" * 40]
    assert "incomplete" in caplog.text


def test_refs_reads_branches_and_peeled_tags(tmp_path):
    repo = make_repo(tmp_path / "repo")
    sha = repo.head()
    repo.tag("REL_1_0")
    repo.tag("light", annotated=False)
    repo.git("branch", "caf\u00e9-\u202eb")  # non-ASCII and bidi are allowed in ref names
    mirror = gitmirror.Mirror(str(repo.path), tmp_path / "mirror")
    mirror.fetch()
    branches, tags = mirror.refs()
    assert branches == {"master": sha, "caf\u00e9-\u202eb": sha}
    assert tags == {"REL_1_0": sha, "light": sha}


def test_revisions_that_look_like_options_are_never_options(tmp_path):
    repo = make_repo(tmp_path / "repo")
    mirror = gitmirror.Mirror(str(repo.path), tmp_path / "mirror")
    mirror.fetch()
    marker = tmp_path / "pwned"
    for rev in (f"--output={marker}", "--all", "-p"):
        assert mirror.has_commit(rev) is False
        assert mirror.resolve(rev) is None
        with pytest.raises(gitmirror.GitError):
            mirror.commit(rev)
        with pytest.raises(gitmirror.GitError):
            mirror.first_parent(rev)
    assert not marker.exists()
    # and real revisions still work through --end-of-options
    assert mirror.has_commit(repo.head()) and mirror.commit(repo.head()).sha == repo.head()


def test_git_output_is_decoded_as_utf8_whatever_the_locale(tmp_path, monkeypatch):
    monkeypatch.setenv("LANG", "C")
    repo = make_repo(tmp_path / "repo")
    sha = hostile_commit(repo, "caf\u00e9 \u202e", author="Zo\u00eb")
    mirror = gitmirror.Mirror(str(repo.path), Path(tmp_path / "mirror"))
    mirror.fetch()
    assert mirror.commit(sha).subject == "caf\u00e9 \u202e"


def test_one_broken_ref_in_the_repository_never_stops_the_mirror(tmp_path):
    # git's upload-pack advertises a ref with a broken name as 0000...: the one glob fetch then fails as a whole
    # (seen in the chaos suite: the mirror, and so every ingest, stopped). The mirror fetches the others by name.
    repo = make_repo(tmp_path / "repo")
    first = repo.head()
    repo.git("update-ref", "refs/heads/gone", first)
    mirror = gitmirror.Mirror(str(repo.path), tmp_path / "mirror.git")
    mirror.fetch()
    assert "gone" in mirror.refs()[0]
    repo.git("update-ref", "-d", "refs/heads/gone")
    broken = repo.path / ".git" / "refs" / "heads" / "--upload-pack=touch x;y"
    broken.write_text(first + "\n")
    later = repo.bench_commit("after the broken ref", 2000)
    repo.git("tag", "-a", "REL_1_0", "-m", "r")
    mirror.fetch()
    branches, tags = mirror.refs()
    assert branches == {"master": later} and tags == {"REL_1_0": later}  # fetched, and "gone" pruned
    assert mirror.has_commit(later)


PG_MESSAGE = """Fix a corner case in the executor

Longer explanation. Discussion: https://evil.example/not-a-trailer (in the body, not the trailer block)

Author: Alice Example <alice@example.org>
Reviewed-by: Bob Example <bob@example.org>
Discussion: https://postgr.es/m/CAH2-Wz=abc+d@mail.gmail.com
Discussion: <https://postgr.es/m/second@example.org>
Discussion: javascript:alert(1)
Discussion: https://evil.example/x|click<!channel>
Discussion: https://postgr.es/m/CAH2-Wz=abc+d@mail.gmail.com
Backpatch-through: 13
"""


def test_committer_and_discussion_links_come_from_the_mirror_and_hostile_links_are_dropped(env):
    """Issue #31: an alert names the committer and links the thread; the history sync stores both. Only https
    links from the trailer block are kept: a `Discussion:` value that is not one would be a link shown to every
    reader of an alert."""
    repo, settings = env
    (repo.path / "f").write_text("x")
    repo.git("add", "f")
    msg = repo.path.parent / "msg"
    msg.write_text(PG_MESSAGE)
    e = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    e.update(
        GIT_AUTHOR_NAME="Alice Example",
        GIT_AUTHOR_EMAIL="alice@example.org",
        GIT_COMMITTER_NAME="Carol Committer",
        GIT_COMMITTER_EMAIL="carol@postgresql.org",
    )
    subprocess.run(["git", "commit", "--quiet", "-F", str(msg)], cwd=repo.path, env=e, check=True)
    sha = repo.head()
    assert ingest_one(settings, sha, 1).status == "ok"
    conn = store.connect(settings.results_db)
    c = store.commits.commit(conn, sha)
    assert c is not None
    assert c.author == "Alice Example <alice@example.org>"
    assert c.committer == "Carol Committer <carol@postgresql.org>"
    assert c.discussion == (
        "https://postgr.es/m/CAH2-Wz=abc+d@mail.gmail.com",
        "https://postgr.es/m/second@example.org",
    )
    # a row stored before schema 21 (no committer) is filled in when an ingest reads its commit again
    conn.execute("UPDATE commits SET committer = '', discussion = '' WHERE sha = ?", (sha,))
    conn.commit()
    assert ingest_one(settings, sha, 2).status in ("ok", "duplicate")
    c = store.commits.commit(conn, sha)
    assert c is not None and c.committer == "Carol Committer <carol@postgresql.org>" and len(c.discussion) == 2


def test_discussion_links_accept_only_plain_https_links():
    ok = "https://postgr.es/m/20240101.abc%40host@example.org"
    assert gitmirror.discussion_links(f"{ok} http://postgr.es/m/x ftp://x/y https://a b") == (ok,)
    assert gitmirror.discussion_links("https://x.org/" + "a" * 400) == ()
    assert gitmirror.discussion_links(" ".join(f"https://x.org/{i}" for i in range(9))) == tuple(
        f"https://x.org/{i}" for i in range(gitmirror.MAX_LINKS)
    )
    assert gitmirror.discussion_links('https://x.org/"onmouseover=1') == ()
