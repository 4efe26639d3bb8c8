"""One worker cannot write another machine's series (issue #26, item 3): a real master and two real workers.

`w2` is a real buildbot-worker on this machine whose host lies about its results: a `sitecustomize` on its
PYTHONPATH (what anyone who controls a worker host can install) rewrites `result.json` when the recipe runner exits,
before the upload, to claim `local`'s machine id with another CPU. Later it stops lying, and its honest results name
the same machine as `local`'s (one host, one fingerprint) without `workers.hosts` saying the two share a host. Both
kinds are refused with a message naming both workers, nothing of them is stored, the machine keeps its first
fingerprint and worker, the build is not re-queued, and the health page and `perffarm status` list the refusals.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from master import launcher
from tests.harness import BIN, Farm, make_repo, wait_until
from workers import hostinfo

pytestmark = pytest.mark.integration
PERFFARM = str(Path(sys.executable).parent / "perffarm")

# Runs in every Python process of w2's host; acts only in the recipe runner that wrote a result.
SITECUSTOMIZE = """
import atexit, json, os, sys

def _forge():
    forge = os.environ.get("PF_TEST_FORGE", "")
    if "--result" not in sys.argv or not os.path.exists(forge):
        return
    result = sys.argv[sys.argv.index("--result") + 1]
    try:
        with open(result) as f:
            doc = json.load(f)
        with open(forge) as f:
            lie = json.load(f)
    except (OSError, ValueError):
        return
    doc["machine"]["id"] = lie["id"]
    doc["machine"]["fingerprint"].update(lie["fingerprint"])
    with open(result, "w") as f:
        json.dump(doc, f)

atexit.register(_forge)
"""


def _builds_of(farm: Farm, builder: str) -> list[dict]:
    info = farm.api(f"builders/{builder}") or {"builders": []}
    if not info["builders"]:
        return []
    builderid = info["builders"][0]["builderid"]
    return (farm.api(f"builders/{builderid}/builds?complete=true&order=buildid") or {"builds": []})["builds"]


def _ops(run: dict) -> list[float]:
    return run["measurements"][("loop", "throughput")]


@pytest.fixture
def farm(tmp_path):
    repo = make_repo(tmp_path / "repo")
    f = Farm(tmp_path / "data", str(repo.path), env={"PERFFARM_WORKERS_NAMES": "local,w2"})
    f.repo = repo
    launcher.worker_password(f.settings, "w2")  # the master's secret for w2, as an operator adds one
    f.start()
    f.w2 = None
    try:
        yield f
    finally:
        if f.w2 is not None and f.w2.poll() is None:
            f.w2.terminate()
            try:
                f.w2.wait(timeout=30)
            except subprocess.TimeoutExpired:
                f.w2.kill()
        f.stop()


def _start_w2(farm: Farm, tmp_path: Path, forge: Path) -> None:
    hooks = tmp_path / "w2-host-python"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    basedir = launcher.prepare_worker(farm.settings, "w2")
    env = dict(farm.env, PF_TEST_FORGE=str(forge))
    env["PYTHONPATH"] = os.pathsep.join([str(hooks), env.get("PYTHONPATH", "")])
    farm.w2 = subprocess.Popen(
        [str(BIN / "buildbot-worker"), "start", "--nodaemon", str(basedir)],
        cwd=basedir,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def connected() -> bool:
        data = farm.api("workers/w2")
        return bool(data and data["workers"] and data["workers"][0].get("connected_to"))

    wait_until(connected, 90, "worker w2 to connect")


def test_a_worker_cannot_write_another_machines_series(farm, tmp_path):
    repo = farm.repo
    honest = hostinfo.fingerprint()
    machine = hostinfo.machine_id(honest)  # both workers run here: this host's machine

    first = repo.bench_commit("measured by local first", 1500)
    (run,) = farm.wait_for_runs(1)  # only local runs yet: w2's request waits for w2
    assert (run["worker"], run["machine_id"], _ops(run)[0]) == ("local", machine, 1500.0)

    # w2 joins and lies: local's machine id, another CPU
    forge = tmp_path / "forge.json"
    forge.write_text(json.dumps({"id": machine, "fingerprint": {"cpu_model": "Forged CPU 9000"}}))
    _start_w2(farm, tmp_path, forge)
    (forged,) = wait_until(lambda: _builds_of(farm, "fixture@w2"), 240, "w2's build of the first commit")
    log = farm.step_log(forged["buildid"], "ingest", "ingest")
    assert "REFUSED, nothing stored" in log and "worker 'w2' sent machine id" in log, log
    assert "Forged CPU 9000" in log and "is worker 'local''s" in log

    # w2 stops lying: its honest result names the same machine, and workers.hosts does not put w2 on local's host
    forge.unlink()
    second = repo.bench_commit("measured by both", 1600)
    wait_until(lambda: len(_builds_of(farm, "fixture@w2")) >= 2, 240, "w2's build of the second commit")
    log = farm.step_log(_builds_of(farm, "fixture@w2")[1]["buildid"], "ingest", "ingest")
    assert "REFUSED, nothing stored" in log and f"machine '{machine}'" in log, log
    assert "bound to worker 'local'" in log and "worker 'w2'" in log and "workers.hosts" in log
    runs = farm.wait_for_runs(2)

    # nothing of w2 stored: local's series holds local's numbers, the machine its first fingerprint and worker
    assert [(r["sha"], r["worker"], r["machine_id"], _ops(r)[0]) for r in runs] == [
        (first, "local", machine, 1500.0),
        (second, "local", machine, 1600.0),
    ]
    ((fingerprint, bound),) = farm.query("SELECT fingerprint, worker FROM machines")
    assert json.loads(fingerprint)["cpu_model"] == honest["cpu_model"] and bound == "local"
    assert sorted(farm.query("SELECT revision, builder FROM rejections")) == sorted(
        [(first, "fixture@w2"), (second, "fixture@w2")]
    )
    assert farm.query("SELECT machine_id, worker, bound_worker, attempts FROM machine_refusals") == [
        (machine, "w2", "local", 2)
    ]
    kept = sorted((farm.settings.incoming_dir / "rejected").glob("*.json.error"))
    assert len(kept) == 2 and all("nothing stored" in k.read_text() for k in kept)

    # never re-queued: a rejected result is an outcome
    time.sleep(3 * farm.settings.reconcile_interval + farm.settings.reconcile_grace)
    assert len(_builds_of(farm, "fixture@w2")) == 2
    assert not (farm.api("buildrequests?complete=false") or {"buildrequests": [1]})["buildrequests"]

    # shown: the health page (re-rendered by the refusing build) and `perffarm status`
    page = (farm.settings.site_dir / "health.html").read_text()
    assert 'id="refused-results"' in page and "<td>w2</td>" in page
    # the claimed machine, as every page shows a machine (site/macros.html `machine`: its name when it has one)
    assert re.search(rf'<td><span class="machine"[^>]*>{machine}</span></td>', page), page
    status = subprocess.run([PERFFARM, "status"], env=farm.env, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    assert f"refused     2 result(s) of w2 for machine {machine}, bound to local" in status.stdout
