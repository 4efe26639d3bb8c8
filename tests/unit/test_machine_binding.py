"""A machine id stays bound to the worker and fingerprint that first reported it (issue #26, item 3).

The rule itself (master/machinebinding.py) on plain data, then through `ingest.ingest_file` on a real SQLite file and
a real git repository: what is stored, what is refused, where the refusal is kept and who shows it.
"""

from __future__ import annotations

import json
import sqlite3
from types import SimpleNamespace

import pytest

from master import cli, ingest, machinebinding, store
from master.publish.pages.health import view
from master.publish.render import render
from master.publish.source import MachineViews
from master.settings import load_settings
from master.store.machines import Binding
from tests.harness import make_repo
from tests.unit.test_result_schema import FINGERPRINT, MACHINE_ID
from tests.unit.test_store_ingest import db_at_schema, put, result_for
from workers import hostinfo

OTHER_CPU = dict(FINGERPRINT, cpu_model="Forged CPU 9000")


def alone(worker: str) -> str:  # no workers.hosts: every worker is its own host
    return worker


def machine(fp: dict, mid: str | None = None) -> dict:
    return {"id": mid or hostinfo.machine_id(fp), "fingerprint": dict(fp)}


def bound_to(worker: str | None, fp: dict = FINGERPRINT) -> Binding:
    return Binding(MACHINE_ID, dict(fp), worker, 0.0)


# ------------------------------------------------------------------------------------------------- the rule


def test_a_new_machine_whose_id_is_its_fingerprints_is_accepted():
    assert machinebinding.check(machine(FINGERPRINT), "local", None, alone, by_worker=True) is None


def test_an_id_that_is_not_the_fingerprints_own_is_refused_naming_both_machines():
    claim = machine(OTHER_CPU, mid=MACHINE_ID)  # local's id, another CPU
    refused = machinebinding.check(claim, "w2", bound_to("local"), alone, by_worker=True)
    assert refused is not None and (refused.machine_id, refused.worker, refused.bound_worker) == (
        MACHINE_ID,
        "w2",
        None,
    )
    text = refused.message
    assert text.startswith("$.machine.id: worker 'w2' sent machine id") and "Forged CPU 9000" in text
    assert f"is machine {hostinfo.machine_id(OTHER_CPU)!r}" in text and "worker 'local''s" in text
    # the master's own process is held to it too
    assert machinebinding.check(claim, "local-cli", None, alone, by_worker=False) is not None


def test_another_workers_result_for_a_bound_machine_is_refused_naming_both_workers():
    refused = machinebinding.check(machine(FINGERPRINT), "w2", bound_to("local"), alone, by_worker=True)
    assert refused is not None and refused.bound_worker == "local"
    assert "bound to worker 'local'" in refused.message and "worker 'w2'" in refused.message
    assert "workers.hosts" in refused.message


def test_workers_on_one_host_share_its_machine():
    hosts = {"local": "box", "w2": "box"}.get
    assert machinebinding.check(machine(FINGERPRINT), "w2", bound_to("local"), lambda w: hosts(w, w), True) is None
    assert machinebinding.check(machine(FINGERPRINT), "local", bound_to("local"), alone, by_worker=True) is None


def test_a_fingerprint_other_than_the_first_under_one_id_is_refused():
    # only a forged or colliding stored row can give one id two fingerprints; the rule holds anyway
    refused = machinebinding.check(machine(FINGERPRINT), "local", bound_to("local", OTHER_CPU), alone, True)
    assert refused is not None and refused.message.startswith("$.machine.fingerprint:")
    assert "cpu_model: 'Forged CPU 9000' -> 'x'" in refused.message
    # memory within the same GiB is the same machine, as its id says
    same = dict(FINGERPRINT, memory_bytes=FINGERPRINT["memory_bytes"] + 4096)
    assert hostinfo.machine_id(same) == MACHINE_ID
    assert machinebinding.check(machine(same), "local", bound_to("local"), alone, by_worker=True) is None


def test_the_master_own_runs_neither_take_nor_need_a_binding():
    assert machinebinding.check(machine(FINGERPRINT), "local-cli", bound_to("local"), alone, by_worker=False) is None


# ---------------------------------------------------------------------------------------- through ingest


@pytest.fixture
def env(tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={
            "PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"),
            "PERFFARM_REPOSITORY_URL": str(repo.path),
            "PERFFARM_WORKERS_NAMES": "local,w2,w3",
            "PERFFARM_WORKERS_HOSTS": "local=box,w3=box",
        }
    )
    settings.incoming_dir.mkdir(parents=True)
    return repo, settings


def ctx(worker: str, build_id: int | None, sha: str) -> store.RunContext:
    return store.RunContext(
        builder=f"fixture@{worker}", worker=worker, source="poll", build_id=build_id, got_revision=sha
    )


def ingest_as(settings, worker: str, build_id: int | None, doc: dict) -> ingest.IngestOutcome:
    path = put(settings, doc, f"{worker}-{build_id}.json")
    return ingest.ingest_file(settings, path, ctx(worker, build_id, doc["commit"]["sha"]), "fixture")


def rows(settings, sql: str) -> list[tuple]:
    conn = sqlite3.connect(settings.results_db)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def test_a_result_claiming_another_workers_machine_is_refused_kept_and_shown(env, monkeypatch, capsys):
    repo, settings = env
    sha = repo.head()
    ingest_as(settings, "local", 1, result_for(sha, samples=(1500.0,)))
    assert rows(settings, "SELECT id, worker FROM machines") == [(MACHINE_ID, "local")]
    first = rows(settings, "SELECT fingerprint FROM machines")

    forged = result_for(sha, samples=(777777.0,))
    forged["machine"]["fingerprint"]["cpu_model"] = "Forged CPU 9000"  # local's id, another machine
    with pytest.raises(ingest.MachineRefused, match=r"worker 'w2' sent machine id") as e:
        ingest_as(settings, "w2", 2, forged)
    assert e.value.refused.bound_worker is None
    replayed = result_for(sha, samples=(777777.0,))  # local's very id and fingerprint, from another host
    for build_id in (3, 4):
        with pytest.raises(ingest.MachineRefused, match=r"bound to worker 'local'.*worker 'w2'"):
            ingest_as(settings, "w2", build_id, replayed)

    # nothing of them stored: local's series holds local's sample only, and the machine keeps its first fingerprint
    assert rows(settings, "SELECT worker, machine_id FROM runs") == [("local", MACHINE_ID)]
    assert rows(settings, "SELECT samples FROM measurements") == [("[1500.0]",)]
    assert rows(settings, "SELECT fingerprint FROM machines") == first
    # kept like any rejected result: the file and its reason, and a rejection row (so never re-queued)
    kept = settings.incoming_dir / "rejected"
    assert "bound to worker 'local'" in (kept / "w2-3.json.error").read_text()
    assert json.loads((kept / "w2-3.json").read_text())["workloads"][0]["metrics"][0]["samples"] == [777777.0]
    assert rows(settings, "SELECT builder, revision FROM rejections") == [("fixture@w2", sha)] * 3
    conn = store.connect(settings.results_db)
    try:
        assert store.results_for(conn, [sha], "fixture@w2") == {sha}
        refusals = store.machines.refusals(conn)
        page = render(
            "health.html",
            root="",
            title="Farm health",
            machines_about=MachineViews(),
            **view(SimpleNamespace(conn=conn, now=9.0, channels=list)),
        )
    finally:
        conn.close()
    assert [(r.machine_id, r.worker, r.bound_worker, r.attempts) for r in refusals] == [(MACHINE_ID, "w2", "local", 3)]
    assert 'id="refused-results"' in page and "<td>w2</td>" in page and "bound to worker &#39;local&#39;" in page

    monkeypatch.setenv("PERFFARM_MASTER_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("PERFFARM_REPOSITORY_URL", settings.repository_url)
    monkeypatch.setenv("PERFFARM_MASTER_WEB_PORT", "9")  # nothing listens there: "master not running"
    assert cli.main(["status"]) == 1  # the master is not running: status exits 1 (a gate)
    out = capsys.readouterr().out
    assert f"refused     3 result(s) of w2 for machine {MACHINE_ID}, bound to local" in out
    assert "bound to worker 'local'" in out


def test_a_worker_listed_on_the_machines_host_shares_it(env):
    repo, settings = env
    sha = repo.head()
    ingest_as(settings, "local", 1, result_for(sha))
    ingest_as(settings, "w3", 2, result_for(sha))  # workers.hosts: local=box, w3=box
    assert rows(settings, "SELECT worker, machine_id FROM runs ORDER BY id") == [
        ("local", MACHINE_ID),
        ("w3", MACHINE_ID),
    ]
    assert rows(settings, "SELECT worker FROM machines") == [("local",)]


def test_the_master_own_runs_bind_nothing_and_the_first_worker_binds(env):
    repo, settings = env
    sha = repo.head()
    ingest_as(settings, "local-cli", None, result_for(sha))  # `perffarm bisect --local`: no Buildbot build
    assert rows(settings, "SELECT worker FROM machines") == [(None,)]
    ingest_as(settings, "w2", 5, result_for(sha))
    assert rows(settings, "SELECT worker FROM machines") == [("w2",)]
    ingest_as(settings, "local-cli", None, result_for(sha))  # bound to w2, measured here: still the master's own
    with pytest.raises(ingest.MachineRefused):
        ingest_as(settings, "local", 6, result_for(sha))
    assert rows(settings, "SELECT worker FROM runs ORDER BY id") == [("local-cli",), ("w2",), ("local-cli",)]


def test_migration_16_binds_stored_machines_to_their_first_workers_build(tmp_path):
    path = tmp_path / "r.sqlite"
    conn = db_at_schema(path, 15)
    conn.execute("INSERT INTO machines VALUES ('m', '{}', 0), ('n', '{}', 0)")
    for run_id, worker, build_id, mid in (
        (1, "local-cli", None, "m"),
        (2, "w1", 7, "m"),
        (3, "w2", 8, "m"),
        (4, "x", None, "n"),
    ):
        conn.execute(
            "INSERT INTO runs (id, sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, "
            "config_hash, status, source, build_id, log_excerpt, host_checks, noisy, ingested_at, result) "
            "VALUES (?, 'c', 'c', 'master', 'b', ?, ?, 'r', 1, 'h', 'ok', 'poll', ?, '', '{}', 0, 0, '{}')",
            (run_id, worker, mid, build_id),
        )
    conn.commit()
    conn.close()
    conn = store.connect(path)
    try:
        assert [tuple(r) for r in conn.execute("SELECT id, worker FROM machines ORDER BY id")] == [
            ("m", "w1"),
            ("n", None),
        ]
        assert store.machines.refusals(conn) == []
    finally:
        conn.close()


def test_refusals_are_bounded(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    try:
        for i in range(store.machines.KEEP + 20):
            with store.transaction(conn):
                store.machines.record_refusal(conn, f"id{i}", "w2", None, "r", float(i))
        kept = store.machines.refusals(conn)
    finally:
        conn.close()
    assert len(kept) == store.machines.KEEP and kept[0].machine_id == f"id{store.machines.KEEP + 19}"
