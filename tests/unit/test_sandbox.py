"""The try-job sandbox (recipes/sandbox.py) with the real bubblewrap: what sandboxed code can and cannot see, as the
worker's own user and as an ordinary user, and the farm's reading of what it wrote.

No mocks: every test runs bwrap for real (Debian's bubblewrap, installed by `make test`). The "ordinary user" cases
start the sandbox through setpriv as uid 65534 when the tests run as root (CI), so both ways a worker runs are
covered on one machine; when the tests already run as an ordinary user, the first case is that one.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from recipes import sandbox
from recipes.sandbox import Sandbox, SandboxUnavailable
from tests.sandbox_support import hostile_program

NOBODY = 65534
AS = ["self", "ordinary-user"]


def _as(who: str) -> list[str]:
    """The argv prefix that runs the sandbox as `who`: the tests' own user, or uid 65534 (needs root)."""
    if who == "self":
        return []
    if os.geteuid() != 0:
        pytest.skip("the tests already run as an ordinary user: the 'self' case is that one")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A directory every user may use (the ordinary-user case cannot enter root's 0700 pytest directories)."""
    d = Path("/tmp") / f"pf-sandbox-test-{os.getpid()}-{tmp_path.name}"
    d.mkdir(mode=0o777)
    d.chmod(0o777)
    yield d
    sandbox.remove_tree(d)


def _dir(path: Path) -> Path:
    path.mkdir(parents=True)
    path.chmod(0o777)
    return path


def _run(who: str, box: Sandbox, argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_as(who), *box.argv(argv, **kw)],
        env=sandbox.host_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("who", AS)
def test_sandboxed_code_sees_only_what_it_is_given(who, shared):
    box = Sandbox.create(_dir(shared / "box"))
    secret = shared / "secrets" / "worker-local"
    secret.parent.mkdir()
    secret.write_text("hunter2\n")
    secret.chmod(0o644)  # readable by every user of the host: only the sandbox keeps it out
    ro, rw = _dir(shared / "ro"), _dir(shared / "rw")
    (ro / "input").write_text("in\n")
    (ro / "input").chmod(0o644)
    script = (
        f"cat {secret} && echo LEAKED; "
        f"cat {ro}/input; "
        f"touch {ro}/x 2>/dev/null && echo WROTE-RO; "
        f"echo out > {rw}/output; "
        "touch /usr/x 2>/dev/null && echo WROTE-USR; "
        "ls /home /root /work 2>/dev/null | grep . && echo SEES-HOME; "
        'test -n "$PF_TEST_SECRET_ENV" && echo SEES-ENV; '
        "unshare --user true 2>/dev/null && echo NESTED-USERNS; "
        "id -u; hostname"
    )
    env_before = os.environ.get("PF_TEST_SECRET_ENV")
    os.environ["PF_TEST_SECRET_ENV"] = "x"
    try:
        r = _run(who, box.seeing(ro=[ro], rw=[rw]), ["/bin/sh", "-c", script])
    finally:
        os.environ.pop("PF_TEST_SECRET_ENV")
        if env_before is not None:
            os.environ["PF_TEST_SECRET_ENV"] = env_before
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    assert out == ["in", str(sandbox.UID), "sandbox"], r.stdout + r.stderr
    assert (rw / "output").read_text() == "out\n"
    assert not (ro / "x").exists()


@pytest.mark.parametrize("who", AS)
def test_sandboxed_code_cannot_see_the_farms_processes_or_network(who, shared):
    box = Sandbox.create(_dir(shared / "box"))
    with socket.socket() as listener:  # the master's web port, say
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        src = _dir(shared / "src") / "probe.c"
        src.write_text(hostile_program(1000, port=port, pid=os.getpid(), env_var="HOME_SECRET"))
        exe = shared / "src" / "probe"
        subprocess.run(["cc", "-o", str(exe), str(src)], check=True)
        exe.chmod(0o755)
        r = _run(who, box.seeing(ro=[exe]), [str(exe)])
    assert r.returncode == 0, r.stderr
    assert "ops 1000" in r.stdout and "SUCCEEDED" not in r.stdout, r.stdout
    assert r.stdout.count("refused") == 3  # the port, this test's process and the variable were each tried
    ps = _run(who, box, ["/bin/sh", "-c", "ls /proc | grep -c '^[0-9]'"])
    assert int(ps.stdout) <= 4, ps.stdout  # its init, sh, ls and grep: nothing of the host


@pytest.mark.parametrize("who", AS)
def test_a_path_can_be_shown_where_another_is_and_hides_it(who, shared):
    box = Sandbox.create(_dir(shared / "box"))
    clone, tree = _dir(shared / "clone"), _dir(shared / "tree")
    _dir(clone / ".git" / "hooks")
    (tree / "mine").write_text("patched tree\n")
    (tree / "mine").chmod(0o666)
    r = _run(
        who,
        box.mounting(tree, clone),
        [
            "/bin/sh",
            "-c",
            f"cat {clone}/mine; mkdir -p {clone}/.git/hooks && echo x > {clone}/.git/hooks/post-checkout",
        ],
    )
    assert r.returncode == 0 and r.stdout == "patched tree\n", r.stdout + r.stderr
    assert not (clone / ".git" / "hooks" / "post-checkout").exists()  # it wrote into its own tree
    assert (tree / ".git" / "hooks" / "post-checkout").exists()


def test_check_says_what_to_do_when_bubblewrap_is_missing_or_cannot_run(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(tmp_path / "no-such-bwrap"))
    with pytest.raises(SandboxUnavailable, match="not installed on this worker: apt-get install bubblewrap"):
        sandbox.check(tmp_path / "box")
    # what bwrap prints where user namespaces are switched off, from a stand-in for it
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(fake))
    with pytest.raises(SandboxUnavailable, match="No permissions to creating new namespace.*user namespaces"):
        sandbox.check(tmp_path / "box")
    monkeypatch.delenv(sandbox.BWRAP_ENV)
    assert sandbox.check(tmp_path / "box").bwrap == shutil.which("bwrap")


def test_files_sandboxed_code_wrote_are_read_and_appended_without_following_links(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("hunter2\n")
    link = tmp_path / "postmaster.pid"
    link.symlink_to(secret)
    with pytest.raises(OSError):
        sandbox.read_untrusted(link)
    with pytest.raises(OSError):
        sandbox.append_untrusted(link, "port = 1\n")
    assert secret.read_text() == "hunter2\n"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        sandbox.read_untrusted(fifo)  # and it did not hang waiting for a writer
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(OSError, match="over the 10-byte limit"):
        sandbox.read_untrusted(big, limit=10)
    ok = tmp_path / "ok"
    ok.write_text("1\n")
    sandbox.append_untrusted(ok, "2\n")
    assert sandbox.read_untrusted(ok) == b"1\n2\n"


def test_remove_tree_removes_what_sandboxed_code_locked_and_never_follows_links(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "file").write_text("mine\n")
    root = tmp_path / "untrusted"
    locked = root / "a" / "b"
    locked.mkdir(parents=True)
    (locked / "f").write_text("x")
    (root / "link").symlink_to(keep)
    locked.chmod(0)
    (root / "a").chmod(stat.S_IRUSR)
    sandbox.remove_tree(root)
    assert not root.exists()
    assert (keep / "file").read_text() == "mine\n"


def test_host_pid_names_only_processes_of_that_sandbox(shared):
    box = Sandbox.create(_dir(shared / "box"))
    procs = [subprocess.Popen(box.argv(["/bin/sh", "-c", f"sleep {60 + i}"]), env=sandbox.host_env()) for i in range(2)]
    try:
        found: list[int | None] = [None, None]
        for _ in range(100):
            found = [sandbox.host_pid(2, p.pid) for p in procs]  # bwrap's init is 1 inside, the command 2
            if all(found):
                break
            subprocess.run(["sleep", "0.05"])
        assert None not in found and found[0] != found[1]
        for i, pid in enumerate(found):
            assert Path(f"/proc/{pid}/cmdline").read_bytes() == f"/bin/sh\0-c\0sleep {60 + i}\0".encode()
        assert sandbox.host_pid(os.getpid(), procs[0].pid) is None  # a host pid is not a pid inside
        assert sandbox.host_pid(99, procs[0].pid) is None
    finally:
        for p in procs:
            p.kill()
            p.wait()
