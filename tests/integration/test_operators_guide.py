"""The operator's guide (docs/operators.md) followed as written on two hosts: a master and a worker (issue #31, 4).

The test reads the guide itself and runs its marked blocks in order (tests/guide_support.py): the master host and
the worker host `bench1` are network namespaces on a private bridge (tests/fleet_support.py), each with its own
/srv/perffarm, /etc/systemd/system and /root, so every path is the guide's own; `master.example.org` resolves
through the worker host's /etc/hosts. The units the guide copies into /etc/systemd/system are parsed and their
ExecStart run with their WorkingDirectory and Environment= only, so a wrong path in a unit or a step the guide
forgets fails here. Then, as the guide promises: the master listens for workers beyond 127.0.0.1, the worker made
by the guide's create_worker.py command connects with the secret copied as the guide says, `perffarm status`
lists it connected with its machine's name, and a commit measured on it (as the master's banner says to measure
the head now) is stored.

What is not run as written, and why (guide_support.SUBSTITUTIONS and FILE_SUBSTITUTIONS hold the full list):
- `adduser` is not run (no system user is created on the test machine): the existing unprivileged user `nobody`
  plays `perffarm` in `chown`, `install -o/-g`, `sudo -u` and the units' User=/Group=, so the farm still runs
  unprivileged and a file it cannot read or write fails the test.
- `apt-get install` becomes `dpkg-query --show` on the same packages (no network, no change to the machine).
- `git clone https://git.example.org/perffarm.git` is a clone of this checkout, uncommitted edits included.
- `make setup` and `pip install 'buildbot-worker==4.3.*'` reach no package registry: the virtualenv is made with
  the host's python3 and given the test's own packages and console scripts (the pinned version is checked).
- `systemctl` starts, stops and restarts the units itself as described above; `journalctl -u` reads their output.
- `scp` and `ssh` to the other host become a copy from its directories and a command run on it.
- In the settings file, repository.url is a small repository of the test and recipes.enabled is the fixture
  recipe (a PostgreSQL build takes many minutes).

Three tests break the guide as an operator could (the secret never installed; the data directory left to root;
worker_host left at 127.0.0.1) and check that following it then fails, at the step that shows it. Needs root
(network and mount namespaces).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from master import store
from master.settings import load_settings
from tests.fleet_support import can_run
from tests.guide_support import FARM_USER, GUIDE, GuideFailed, GuideRun
from tests.harness import make_repo, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(can_run() is not None, reason=f"operator's guide on a fleet: {can_run()}"),
]

SETTINGS = "/srv/perffarm/perffarm.toml"
INSTALL_SECRET = "install -m 600 -o perffarm -g perffarm worker-bench1 /srv/perffarm/var/secrets/worker-bench1\n"
# Press "Measure a commit" as the banner says (the web UI's force form, a JSON-RPC call on the REST API), from the
# master host: the web UI listens on its 127.0.0.1 only.
FORCE = """
import json, sys, urllib.request
base, builder, revision, repository = sys.argv[1:]
with urllib.request.urlopen(f"{base}api/v2/builders/{builder}", timeout=10) as r:
    builderid = json.load(r)["builders"][0]["builderid"]
params = {"builderid": str(builderid), "branch": "master", "revision": revision, "reason": "operator's guide",
          "perffarm_options": "", "project": "perffarm", "repository": repository}
body = json.dumps({"jsonrpc": "2.0", "method": "force", "id": 1, "params": params}).encode()
req = urllib.request.Request(f"{base}api/v2/forceschedulers/force", body, {"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as r:
    print(r.read().decode())
"""


def _workdir() -> Path:
    """A directory the farm's user can read (pytest's tmp_path is root's only): the repository lives in it."""
    work = Path(tempfile.mkdtemp(prefix="perffarm-guide-"))
    work.chmod(0o755)
    return work


def _repo(work: Path) -> Path:
    repo = make_repo(work / "repo")
    repo.bench_commit("a second commit, measured on the worker host", 2000)
    # the master reads it as the farm's user, and git refuses a repository its reader does not own
    subprocess.run(["chown", "-R", f"{FARM_USER}:", str(repo.path)], check=True)
    return repo.path


def _follow(markdown: str, expect_timeout: float = 90) -> GuideRun:
    work = _workdir()
    run = GuideRun(work=work, repo=_repo(work), markdown=markdown, expect_timeout=expect_timeout)
    try:
        run.start()
        run.follow()
    except BaseException:
        _finish(run)
        raise
    return run


def _finish(run: GuideRun) -> None:
    try:
        run.stop()
    finally:
        shutil.rmtree(run.work, ignore_errors=True)


def _broken(old: str, new: str) -> str:
    text = GUIDE.read_text()
    assert text.count(old) == 1, f"the guide no longer has {old!r}: update this test"
    return text.replace(old, new)


# The broken guides run first, each on its own fleet, before the module's working farm is made (a process has
# one fleet at a time: its names carry the process id).


def test_a_guide_that_never_installs_the_secret_fails_where_the_master_starts() -> None:
    with pytest.raises(GuideFailed) as failed:
        _finish(_follow(_broken(INSTALL_SECRET, ""), expect_timeout=60))
    message = str(failed.value)
    assert "journalctl -u perffarm-master" in message, message  # the step that waits for the master
    assert "no password secret for worker(s) bench1" in message, message


def test_a_guide_that_leaves_the_data_directory_to_root_fails_where_the_master_starts() -> None:
    # `install -d ... /srv/perffarm/var/secrets` alone makes var root's: the master, run as perffarm, cannot write it
    with pytest.raises(GuideFailed) as failed:
        _finish(_follow(_broken("install -d -o perffarm -g perffarm /srv/perffarm/var\n", ""), expect_timeout=60))
    message = str(failed.value)
    assert "journalctl -u perffarm-master" in message, message
    assert f"master.data_dir /srv/perffarm/var: not writable for user {FARM_USER}" in message, message


def test_a_guide_that_leaves_worker_host_at_loopback_fails_at_the_status_check() -> None:
    with pytest.raises(GuideFailed) as failed:
        _finish(_follow(_broken('worker_host = "0.0.0.0"', 'worker_host = "127.0.0.1"'), expect_timeout=20))
    message = str(failed.value)
    assert "perffarm status" in message and re.search(r"worker +bench1 +DISCONNECTED", message), message


@pytest.fixture(scope="module")
def guide() -> Iterator[GuideRun]:
    run = _follow(GUIDE.read_text())
    try:
        yield run
    finally:
        print("\n".join(run.log))
        _finish(run)


def test_the_master_listens_for_workers_beyond_loopback(guide: GuideRun) -> None:
    master, bench1 = guide.hosts["master"], guide.hosts["bench1"]
    listening = guide.run(master, "ss -ltnH 'sport = :9989'", check=True).stdout.split()
    assert "0.0.0.0:9989" in listening, listening  # worker_host as the guide's settings file sets it
    peers = guide.run(master, "ss -tnH state established '( sport = :9989 )'", check=True).stdout
    assert f"{bench1.netns.address}:" in peers, peers  # the worker host's connection, over the bridge


def test_the_worker_connects_with_the_secret_copied_as_the_guide_says(guide: GuideRun) -> None:
    master, bench1 = guide.hosts["master"], guide.hosts["bench1"]
    secret = master.local("/srv/perffarm/var/secrets/worker-bench1")
    st = secret.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == guide.uid, oct(st.st_mode)
    tac = bench1.local("/srv/perffarm/workers/bench1/buildbot.tac").read_text()
    assert f"passwd = {secret.read_text().strip()!r}" in tac  # the password create-worker gave the worker
    assert "buildmaster_host = 'master.example.org'" in tac
    assert not bench1.local("/srv/perffarm/workers/bench1-master-secret").exists()  # both copies deleted
    assert not master.local("/srv/perffarm/worker-bench1").exists()


def test_status_lists_the_worker_connected_with_its_machine_name(guide: GuideRun) -> None:
    master = guide.hosts["master"]
    line = "worker      bench1               connected  (dandelion, Alice Example <alice@example.org>)"
    assert line in master.last_output.splitlines(), master.last_output  # what the guide's output block shows
    out = guide.run(
        master,
        f"PERFFARM_CONFIG={SETTINGS} /srv/perffarm/checkout/.venv/bin/perffarm status --format json",
        check=True,
        user=True,
    ).stdout
    workers = {w["name"]: w for w in json.loads(out)["workers"]}
    assert workers["bench1"]["connected"] and workers["bench1"]["machine_name"] == "dandelion", workers


def test_a_commit_measured_on_the_worker_host_is_stored(guide: GuideRun) -> None:
    master = guide.hosts["master"]
    banner = guide.journal("perffarm-master")
    web = re.search(r"web UI\s+(http://\S+/)", banner)
    pick = re.search(r"pick (\S+),", banner)
    ls_remote = re.search(r"(git ls-remote \S+ refs/heads/master)\s+prints", banner)
    assert web and pick and ls_remote, banner
    assert pick[1] == "fixture@bench1"
    sha = guide.run(master, ls_remote[1], check=True, user=True).stdout.split()[0]
    python = "/srv/perffarm/checkout/.venv/bin/python"
    force = shlex.join([python, "-c", FORCE, web[1], pick[1], sha, str(guide.repo)])
    guide.run(master, force, check=True, user=True)
    settings = load_settings(environ={"PERFFARM_CONFIG": str(master.local(SETTINGS))})
    db = master.local(str(settings.results_db))

    def stored() -> list:
        if not db.exists():
            return []
        conn = store.connect_readonly(db)
        try:
            return store.list_runs(conn, sha_prefix=sha)
        finally:
            conn.close()

    try:
        runs = wait_until(stored, 180, f"a stored run of {sha[:12]}")
    except TimeoutError as e:
        raise AssertionError(f"{e}\n{guide.diagnostics()}") from None
    run = runs[0]
    assert (run.worker, run.builder, run.recipe, run.status) == ("bench1", "fixture@bench1", "fixture", "ok"), run
    conn = store.connect_readonly(db)
    try:
        assert store.measurements_for(conn, [run.id]), "a run without measurements"
    finally:
        conn.close()
