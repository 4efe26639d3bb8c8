"""Patch branches in cfbot's layout measured and published (tests/unit/test_patches_page.py, and the browser test
of the patches page): real git repositories, the farm's own queue and job ingest, a real results database."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from master import gitmirror, store
from master.jobs import cfbot, ingest
from master.publish import publisher
from master.settings import Settings, load_settings
from recipes.callgrind import FunctionCost, Profile
from tests.harness import GitRepo, make_repo

BUILDER = "jobs-pg-quick@local"
THREAD = "https://postgr.es/m/CA%2Bthread%40mail.example.org"
HOSTILE = 'cf/"><img/src=x/onerror=alert(1)>'


def profile(functions: dict[str, int]) -> dict:
    costs = {n: FunctionCost(n, f"src/{n}.c", 10, s, s) for n, s in functions.items()}
    return Profile("Ir", sum(functions.values()), costs, {}).to_json()


def side(label: str, sha: str, tps: list[float], patch: str | None, callgrind: dict | None = None) -> dict:
    doc = {
        "label": label,
        "sha": sha,
        "patch": ingest.patch_id(patch) if patch else None,
        "workloads": [
            {
                "name": "pgbench-ro",
                "flags": [],
                "metrics": [{"name": "tps", "unit": "tx/s", "direction": "higher", "samples": tps}],
            }
        ],
    }
    if callgrind:
        doc["callgrind"] = callgrind
    return doc


def result(job, b_factor: float, profiles: tuple[dict, dict] | None = None) -> dict:
    a = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0]
    b = [x * b_factor * (1 + 0.001 * (i % 2)) for i, x in enumerate(a)]
    cg = (
        (
            {"op-join-hash": {"queries": 100, "profile": profiles[0]}},
            {"op-join-hash": {"queries": 100, "profile": profiles[1]}},
        )
        if profiles
        else (None, None)
    )
    return {
        "schema": "perffarm-job-result",
        "schema_version": 1,
        "job": job.id,
        "recipe": {"name": "pg-quick", "version": 1, "config_hash": "abc", "options": {}},
        "machine": {
            "id": "m1",
            "fingerprint": {"cpu_model": "x", "kernel": "k", "compiler": "c", "cores": 2, "memory_bytes": 1},
        },
        "host_checks": {"noisy": False},
        "status": "ok",
        "log_excerpt": "",
        "sides": [side("A", job.sides[0].sha, a, None, cg[0]), side("B", job.sides[1].sha, b, job.patch, cg[1])],
        "started_at": "2026-11-25T00:00:00+00:00",
        "finished_at": "2026-11-25T00:01:00+00:00",
    }


def build_site(tmp_path: Path) -> tuple[Settings, dict[str, int]]:
    """Queue cfbot jobs for six patch branches, store their results, publish: (settings, branch -> job id)."""
    settings = load_settings(environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data")})
    settings.data_dir.mkdir(parents=True)
    upstream = make_repo(tmp_path / "postgres")
    patches = GitRepo(tmp_path / "patches")
    subprocess.run(["git", "clone", "--quiet", str(upstream.path), str(patches.path)], check=True)
    patches.git("config", "user.email", "cfbot@example.org")
    patches.git("config", "user.name", "cfbot")
    mirror = gitmirror.Mirror(str(upstream.path), settings.mirror_dir)
    mirror.ensure()
    mirror.fetch()
    messages = {
        "cf/1001": f"[CF 1001] v1 - slower\n\nDiscussion: {THREAD}\n",
        "cf/1002": "[CF 1002] v1 - faster\n\nhttps://commitfest.postgresql.org/patch/1002/\n",
        "cf/1003": "[CF 1003] v1 - neutral\n\nDiscussion: javascript:alert(1)\n",
        HOSTILE: "<script>alert('subject')</script>\n\nDiscussion: https://x.example.org/\"><script>\n",
        "cf/1005": "[CF 1005] v1 - breaks the build\n",
        "cf/1006": "[CF 1006] v1 - measured\n",
    }
    for i, (branch, message) in enumerate(messages.items()):
        patches.git("checkout", "--quiet", "-b", branch, "master")
        patches.commit(message, {f"src/file{i}.c": f"int x = {i};\n"})
    patches.git("checkout", "--quiet", "master")

    def one_pass() -> dict[str, int]:
        conn = store.connect(settings.results_db)
        try:
            heads = cfbot.patch_branches(settings.data_dir / "cfbot.git", str(patches.path), "cf/.*", "master")
            outcomes = cfbot.queue(conn, settings.data_dir / "cfbot.git", mirror, heads, "master", BUILDER, [BUILDER])
        finally:
            conn.close()
        return {o.branch: o.job_id for o in outcomes if o.job_id}

    ids = one_pass()
    assert set(ids) == set(messages)
    conn = store.connect(settings.results_db)

    def finish(branch: str, factor: float, profiles: tuple[dict, dict] | None = None) -> None:
        path = tmp_path / "job.json"
        path.write_text(json.dumps(result(store.jobs.get(conn, ids[branch]), factor, profiles)))
        outcome = ingest.ingest_file(settings, path, ids[branch], 7, "http://x/#/builders/1/builds/7")
        assert outcome.state == "done", outcome.message

    before = profile({"main": 1_000, "ExecHashJoin": 50_000, "hash_bytes": 20_000})
    after = profile({"main": 1_000, "ExecHashJoin": 65_000, "hash_bytes": 20_500, "new_helper": 3_000})
    finish("cf/1001", 0.80, (before, after))  # 20% slower: a regression, with the functions that grew
    publisher.publish_all(settings, jobs=1)  # the rest is published as the farm does when a job ends: publish_jobs
    finish("cf/1002", 1.25)
    finish("cf/1003", 1.0)
    finish(HOSTILE, 1.0)
    with store.transaction(conn):
        store.jobs.finish(conn, ids["cf/1005"], result=None, error="build failed: <b>oops</b>", machine_id="m1", now=9)
    finish("cf/1006", 1.25)
    # a push to cf/1006: its new head is queued, the verdict is still the measured head's
    patches.git("checkout", "--quiet", "cf/1006")
    patches.commit("[CF 1006] v2 - measured again", {"src/more.c": "int y;\n"})
    patches.git("checkout", "--quiet", "master")
    ids["cf/1006 v2"] = one_pass()["cf/1006"]
    conn.close()
    publisher.publish_jobs(settings)
    return settings, ids
