"""A small farm history for the site's tests, made by the real paths: a git repo, ingest, the after-ingest pipeline
(detection, bisection start, alerts, incremental publish), a bisection's probe runs, and triage.

History of branch master (positions 0..N): `pgbench` at ~1000 ops/s, then ~850 from commit CULPRIT on (a 15%
regression); commit CULPRIT is first left unmeasured so detection reports a range and starts a bisection, whose
probes then find it. Commit subjects include script/markup injections; a tag REL_1_0 marks a release.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from master import ingest, pipeline, store
from master.bisection import state as bisection
from master.publish.writer import wait_for_cleanup
from master.settings import Settings, load_settings
from tests.harness import GitRepo, make_repo
from tests.unit.test_result_schema import FINGERPRINT, MACHINE_ID

XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_SCRIPT = "</script><script>alert(1)</script>"
XSS_AUTHOR = "Mallory <img src=y onerror=alert(2)>"
# commit 6's message after its subject "change 6": two paragraphs, markup, a tab, a bidi override and a control
MESSAGE_AT = 6
MESSAGE_BODY = (
    f"The first paragraph names {XSS_IMG}\nand goes on\ton its second line.\n\n"
    "A second one: \u202eesrever & </script>\x1b[31m red?\n\nDiscussion: https://postgr.es/m/1@example.org"
)
N_BEFORE, N_AFTER = 12, 12
WORKLOADS = ("pgbench", "select1")


@dataclass
class SiteFarm:
    repo: GitRepo
    settings: Settings
    shas: list[str]  # commit i of master (0 = the initial commit)
    culprit: str
    builds: int = 0

    def ingest(self, i: int, level: float, seed: int, bisection_id: int | None = None) -> int:
        """Store one run of commit i through master.ingest, then the after-ingest pipeline (as the master does)."""
        rng = random.Random(seed)
        doc = result_doc(
            self.shas[i],
            {w: [level * (1 + k * 0.1) * (1 + rng.gauss(0, 0.004)) for _ in range(5)] for k, w in enumerate(WORKLOADS)},
        )
        self.builds += 1
        path = self.settings.incoming_dir / f"b-{self.builds}.json"
        path.write_text(json.dumps(doc))
        ctx = store.RunContext(
            builder="fixture@local",
            worker="local",
            source="bisect" if bisection_id else "poll",
            build_id=self.builds,
            got_revision=self.shas[i],
            bisection_id=bisection_id,
            build_url=f"http://127.0.0.1:8010/#/builders/1/builds/{self.builds}",
        )
        out = ingest.ingest_file(self.settings, path, ctx, "fixture")
        after = pipeline.after_ingest(self.settings, out.run_id)
        assert not after.failed, after.messages
        return out.run_id


def result_doc(sha: str, samples: dict[str, list[float]]) -> dict:
    return {
        "schema": "perffarm-result",
        "schema_version": 1,
        "commit": {"sha": sha, "ref": "master"},
        "recipe": {"name": "fixture", "version": 1, "config_hash": "abc"},
        "machine": {"id": MACHINE_ID, "fingerprint": dict(FINGERPRINT)},
        "host_checks": {"noisy": False},
        "status": "ok",
        "log_excerpt": "",
        "workloads": [
            {"name": w, "metrics": [{"name": "throughput", "unit": "ops/s", "direction": "higher", "samples": xs}]}
            for w, xs in samples.items()
        ],
    }


def settings_for(data_dir: Path, repo: Path, config: Path | None = None) -> Settings:
    env = {"PERFFARM_MASTER_DATA_DIR": str(data_dir), "PERFFARM_REPOSITORY_URL": str(repo)}
    if config is not None:
        env["PERFFARM_CONFIG"] = str(config)
    return load_settings(environ=env)


def build_farm(tmp: Path, *, bisect: bool = True) -> SiteFarm:
    """The history described above, with an alert, its bisection's culprit, and a channel failing delivery.

    The alert is left untriaged (triage cancels unsent messages, which would make the channel healthy again);
    tests triage it themselves with master.alerts.sync.set_state."""
    repo = make_repo(tmp / "repo")
    shas = [repo.head()]
    culprit_at = N_BEFORE + 1
    for i in range(1, N_BEFORE + N_AFTER + 1):
        subject = {3: XSS_IMG, 5: XSS_SCRIPT, culprit_at: f"make it slower {XSS_IMG}"}.get(i, f"change {i}")
        if i == MESSAGE_AT:
            subject += "\n\n" + MESSAGE_BODY
        if i == 7:
            repo.git("config", "user.name", XSS_AUTHOR)
        shas.append(repo.bench_commit(subject, 1000 + i))
        if i == 7:
            repo.git("config", "user.name", "Test Er")
        if i == 4:
            repo.tag("REL_1_0")
    repo.tag("REL_2_0")  # the head: 15% slower than REL_1_0
    # a channel that is then dropped from the settings: its queued messages make it "failing" (docs/alerts.md)
    config = tmp / "farm.toml"
    config.write_text(
        '[[alerts.channels]]\nname = "ops-hook"\nkind = "webhook"\nurl_secret = "ops-hook-url"\n'
        'kinds = ["regression", "improvement"]\n'
    )
    settings = settings_for(tmp / "data", repo.path, config)
    settings.incoming_dir.mkdir(parents=True, exist_ok=True)
    farm = SiteFarm(repo, settings, shas, shas[culprit_at])
    for i in range(len(shas)):
        if i != culprit_at:
            farm.ingest(i, 1000.0 if i < culprit_at else 850.0, seed=i)
    conn = store.connect(settings.results_db)
    try:
        running = bisection.running(conn)
        if bisect and running:
            bid = running[0]
            for round_ in range(12):
                decision = bisection.advance(conn, bid)
                if not isinstance(decision, bisection.Measure):
                    break
                i = shas.index(decision.commit)
                farm.ingest(i, 1000.0 if i < culprit_at else 850.0, seed=100 + round_, bisection_id=bid)
            bisection.report_to_alert(conn, bid, settings.alerts)
    finally:
        conn.close()
    farm.settings = settings_for(tmp / "data", repo.path)  # without the channel: it is now "not configured"
    return farm


ARCHAEOLOGY_TAGS = ("REL_13_16", "REL_15_18", 'REL_18_6"><img src=x onerror=alert(1)>')
# median tps per release: select-only loses at 1000 clients on 13 (the seed 003 shape), idle too; ro gains
ARCHAEOLOGY = {
    "select-only-c1": (10_000.0, 11_000.0, 12_000.0),
    "select-only-c16": (30_000.0, 33_000.0, 36_000.0),
    "select-only-c1000": (5_000.0, 15_000.0, 20_000.0),
    "idle-connections-c1-i0": (10_000.0, 10_500.0, 11_000.0),
    "idle-connections-c1-i1000": (6_000.0, 10_000.0, 10_800.0),
    "pgbench-ro-prepared-c1": (50_000.0, 55_000.0, 60_000.0),  # one count only: a bar chart, not a sweep
}


def copy_farm(template: SiteFarm, dst: Path) -> SiteFarm:
    """A private copy of a farm (repo + data dir), so a test can add runs and publish without interfering.
    Retired site versions are deleted by a background thread: wait for it, and never copy a half-deleted one."""
    wait_for_cleanup()
    shutil.copytree(template.settings.data_dir.parent, dst, symlinks=True, ignore=shutil.ignore_patterns("*.trash"))
    t = template
    return type(t)(
        t.repo.__class__(dst / "repo"), settings_for(dst / "data", dst / "repo"), list(t.shas), t.culprit, t.builds
    )


def add_release_job(
    settings: Settings,
    levels: dict[str, dict[str, float]],
    now: float = 1_700_000_100.0,
    metric: tuple[str, str] = ("tps", "tx/s"),
    shas: dict[str, str] | None = None,
) -> int:
    """A done release job (docs/jobs.md) in the results DB: `levels` is tag -> workload -> median of `metric`
    (name, unit; higher is better); each side gets three rounds at 0.99, 1.0 and 1.01 of its level, the same
    round pattern on every side. The tags' commits come from the store unless `shas` names them."""
    from master.store.jobs import JobSide

    conn = store.connect(settings.results_db)
    try:
        tags = shas if shas is not None else store.commits.tags(conn)
        sides = tuple(JobSide(chr(ord("A") + i), t, tags[t]) for i, t in enumerate(levels))
        doc = {
            "recipe": {"name": "fixture", "version": 1, "config_hash": "abc"},
            "machine": {"id": MACHINE_ID},
            "sides": [
                {
                    "label": side.label,
                    "sha": side.sha,
                    "patch": None,
                    "workloads": [
                        {
                            "name": w,
                            "metrics": [
                                {
                                    "name": metric[0],
                                    "unit": metric[1],
                                    "direction": "higher",
                                    "samples": [v * f for f in (0.99, 1.0, 1.01)],
                                }
                            ],
                        }
                        for w, v in levels[side.revision].items()
                    ],
                }
                for side in sides
            ],
        }
        with store.transaction(conn):
            job_id = store.jobs.insert(
                conn,
                kind="releases",
                builder="jobs-fixture@local",
                branch=sides[0].revision,
                sides=sides,
                options=(),
                patch=None,
                requested_by="t",
                now=now,
            )
            store.jobs.finish(conn, job_id, result=doc, error=None, machine_id=MACHINE_ID, now=now)
    finally:
        conn.close()
    return job_id


def build_archaeology(data_dir: Path) -> Settings:
    """A results DB with three release tags, each measured with the seeds' sweeps (tps, three samples each), for
    the archaeology page; the last tag's name is hostile (it must render as text)."""
    from master.store import CommitInfo, RunContext

    settings = settings_for(data_dir, data_dir.parent / "no-repo")
    conn = store.connect(settings.results_db)
    shas = [f"{i + 1:040x}" for i in range(len(ARCHAEOLOGY_TAGS))]
    commits = [
        CommitInfo(sha, f"release {i}", "A <a@x>", 1_700_000_000 + i, 1_700_000_000 + i, (shas[i - 1],) if i else ())
        for i, sha in enumerate(shas)
    ]
    with store.transaction(conn):
        store.append_branch(conn, "master", commits, 0)
        store.upsert_commits(conn, commits)
        store.set_tags(conn, dict(zip(ARCHAEOLOGY_TAGS, shas)))
    for i, sha in enumerate(shas):
        doc = result_doc(sha, {w: [v[i] * f for f in (0.99, 1.0, 1.01)] for w, v in ARCHAEOLOGY.items()})
        for w in doc["workloads"]:
            w["metrics"][0].update(name="tps", unit="tx/s")
        with store.transaction(conn):
            store.insert_run(conn, doc, RunContext("fixture@local", "local", "poll", 100 + i))
    conn.close()
    return settings


# seed 001's OLAP half on the archaeology page: instructions per query (millions) and each release's plan, per tag of
# ARCHAEOLOGY_TAGS (docs/releases.md's figures for Q1, Q4 and Q17); Q4's plan changes at the third release, as 18.6
# plans it, and Q17's third plan names a hostile node (worker output: it must render as text)
Q04_SEMI = (
    "Sort\n  HashAggregate\n    Hash Semi Join\n      Seq Scan on orders\n      Hash\n        Seq Scan on lineitem"
)
Q04_RIGHT = Q04_SEMI.replace("Hash Semi Join", "Hash Right Semi Join")  # the build side swapped: same scans
Q17_HASH = (
    "Aggregate\n  Hash Join\n    Seq Scan on lineitem\n    Hash\n      Seq Scan on part\n    SubPlan\n      Aggregate"
)
Q17_HOSTILE = "Aggregate\n  <img src=x onerror=alert(3)> Nested Loop\n    Seq Scan on part\n    Seq Scan on lineitem"
ANALYTIC = {
    "tpch-q01": ((58.07e6, 58.07e6 * 1.008, 58.07e6 * 0.919), ("Sort\n  HashAggregate\n    Seq Scan on lineitem",) * 3),
    "tpch-q04": ((10.43e6, 10.43e6 * 1.003, 10.43e6 * 0.773), (Q04_SEMI, Q04_SEMI, Q04_RIGHT)),
    "tpch-q17": ((7.77e6, 7.77e6 * 1.004, 7.77e6 * 0.866), (Q17_HASH, Q17_HASH, Q17_HOSTILE)),
    "op-join-hash": ((1.0e6, 1.02e6, 0.9e6), None),  # the operation suite (group executor): no plans kept
}


def analytic_sides(tags: list[str]) -> dict[str, tuple[list[dict], dict[str, str]]]:
    """Per tag: the pg-quick result workloads of ANALYTIC (two samples that agree, as instruction counts do, with
    the real recipe's workload hashes, so the site finds their groups) and the plans member."""
    from recipes import registry

    quick = registry.get("pg-quick")
    out = {}
    for i, tag in enumerate(tags):
        workloads = [
            {
                "name": name,
                "config_hash": quick.workload_hash(name),
                "flags": [],
                "metrics": [
                    {"name": "instructions", "unit": "instructions/query", "direction": "lower", "samples": [v[i]] * 2}
                ],
            }
            for name, (v, _) in ANALYTIC.items()
        ]
        out[tag] = (workloads, {name: plans[i] for name, (_, plans) in ANALYTIC.items() if plans})
    return out


def add_analytic_release_job(settings: Settings, tags: list[str], now: float = 1_700_000_200.0) -> int:
    """A release job of pg-quick that measured ANALYTIC on `tags` (stored tags of the results DB), its result
    uploaded through the farm's job ingest (master/jobs/ingest.py: validate_job, the job's sides checked)."""
    from master.jobs import ingest as job_ingest
    from master.store.jobs import JobSide
    from recipes import registry

    quick = registry.get("pg-quick")
    conn = store.connect(settings.results_db)
    try:
        shas = store.commits.tags(conn)
        sides = tuple(JobSide(chr(ord("A") + i), t, shas[t]) for i, t in enumerate(tags))
        with store.transaction(conn):
            job_id = store.jobs.insert(
                conn,
                kind="releases",
                builder="jobs-pg-quick@local",
                branch=tags[0],
                sides=sides,
                options=(),
                patch=None,
                requested_by="t",
                now=now,
            )
    finally:
        conn.close()
    per = analytic_sides(tags)
    doc = {
        "schema": "perffarm-job-result",
        "schema_version": 1,
        "job": job_id,
        "recipe": {"name": "pg-quick", "version": quick.version, "config_hash": quick.config_hash(), "options": {}},
        "machine": {"id": MACHINE_ID, "fingerprint": dict(FINGERPRINT)},
        "host_checks": {"noisy": False},
        "status": "ok",
        "log_excerpt": "",
        "sides": [
            {
                "label": s.label,
                "sha": s.sha,
                "patch": None,
                "workloads": per[s.revision][0],
                "plans": per[s.revision][1],
            }
            for s in sides
        ],
        "started_at": "2026-11-27T00:00:00+00:00",
        "finished_at": "2026-11-27T00:10:00+00:00",
    }
    path = settings.data_dir / f"job-{job_id}.json"
    path.write_text(json.dumps(doc))
    outcome = job_ingest.ingest_file(settings, path, job_id, 1, "http://127.0.0.1:8010/#/builders/1/builds/1")
    assert outcome.state == "done", outcome.message
    return job_id
