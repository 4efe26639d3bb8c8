"""Results store and ingest on a real SQLite file and a real git repository."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from master import ingest, store
from master.settings import load_settings
from tests.harness import make_repo
from tests.unit.test_result_schema import good

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path):
    repo = make_repo(tmp_path / "repo")
    settings = load_settings(
        environ={"PERFFARM_MASTER_DATA_DIR": str(tmp_path / "data"), "PERFFARM_REPOSITORY_URL": str(repo.path)}
    )
    settings.incoming_dir.mkdir(parents=True)
    return repo, settings


def put(settings, doc, name="b-1.json"):
    path = settings.incoming_dir / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def result_for(sha, ref="master", samples=(1.0, 2.0)):
    doc = good()
    doc["commit"] = {"sha": sha, "ref": ref}
    doc["workloads"][0]["metrics"][0]["samples"] = list(samples)
    return doc


def run_ctx(build_id=1, sha=None, revision=None):
    return store.RunContext(
        builder="fixture@local", worker="local", source="poll", build_id=build_id, got_revision=sha, revision=revision
    )


def test_migrations_wal_and_version(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(store.MIGRATIONS)
    assert store.migrate(conn) == len(store.MIGRATIONS)  # idempotent
    conn.execute(f"PRAGMA user_version={len(store.MIGRATIONS) + 1}")
    conn.close()
    with pytest.raises(store.StoreError, match="newer than this code"):
        store.connect(tmp_path / "r.sqlite")


def test_processes_opening_a_new_database_at_once_migrate_it_once(tmp_path):
    # The master and a CLI verb (or a test) may open a fresh results DB at the same moment: the second must wait
    # for the first migration instead of replaying it ("table machines already exists" before the fix).
    path = tmp_path / "r.sqlite"
    code = "import sys; from master import store; store.connect(sys.argv[1]).close(); print('ok')"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [(p.returncode, o.strip()) for p, (o, _) in zip(procs, outs)] == [(0, "ok")] * 8, [e for _, e in outs]
    conn = store.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(store.MIGRATIONS)


def test_ingest_stores_run_samples_commit_and_branch_order(env):
    repo, settings = env
    second = repo.bench_commit("second <script>alert(1)</script>", 2000)
    third = repo.bench_commit("third", 3000)
    out = ingest.ingest_file(settings, put(settings, result_for(second)), run_ctx(1, second), "fixture")
    assert out.status == "ok" and out.samples == 2 and out.commits_added == 3
    conn = store.connect(settings.results_db)
    row = conn.execute("SELECT subject, author FROM commits WHERE sha = ?", (second,)).fetchone()
    assert tuple(row) == ("second <script>alert(1)</script>", "Test Er <tester@example.org>")
    order = [r[0] for r in conn.execute("SELECT sha FROM branch_commits WHERE branch='master' ORDER BY position")]
    assert order[1:] == [second, third]
    samples = conn.execute("SELECT samples FROM measurements").fetchone()[0]
    assert json.loads(samples) == [1.0, 2.0]
    assert not (settings.incoming_dir / "b-1.json").exists()
    # same build again: idempotent, nothing duplicated
    with pytest.raises(store.AlreadyStored):
        ingest.ingest_file(settings, put(settings, result_for(second)), run_ctx(1, second), "fixture")
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_branch_order_grows_incrementally_and_survives_a_rewrite(env):
    repo, settings = env
    a = repo.bench_commit("a", 1)
    ingest.ingest_file(settings, put(settings, result_for(a)), run_ctx(1, a), "fixture")
    b = repo.bench_commit("b", 2)
    ingest.ingest_file(settings, put(settings, result_for(b)), run_ctx(2, b), "fixture")
    conn = store.connect(settings.results_db)
    assert store.branch_head(conn, "master") == (2, b)
    repo.git("reset", "--hard", a)  # history rewritten: b is gone from master
    c = repo.bench_commit("c", 3)
    ingest.ingest_file(settings, put(settings, result_for(c)), run_ctx(3, c), "fixture")
    order = [r[0] for r in conn.execute("SELECT sha FROM branch_commits WHERE branch='master' ORDER BY position")]
    assert order[-2:] == [a, c] and b not in order


def test_annotated_tag_maps_to_its_commit(env):
    repo, settings = env
    sha = repo.head()
    repo.tag("REL_15_1")
    tag_object = repo.git("rev-parse", "REL_15_1")
    assert tag_object != sha
    ingest.ingest_file(
        settings, put(settings, result_for(sha, "refs/tags/REL_15_1")), run_ctx(1, sha, revision=tag_object), "fixture"
    )
    conn = store.connect(settings.results_db)
    assert conn.execute("SELECT sha FROM tags WHERE name = 'REL_15_1'").fetchone()[0] == sha
    assert tuple(conn.execute("SELECT ref, revision FROM runs").fetchone()) == ("REL_15_1", tag_object)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"schema": "perffarm-result", "schema_version": 1}), "$.commit"),
        ("__nan__", "finite number"),
        ("__wrong_sha__", "the build checked out"),
        ("__wrong_recipe__", "builder runs 'fixture'"),
        ("__unknown_commit__", "is not a commit of"),
    ],
)
def test_malformed_results_are_rejected_and_nothing_is_stored(env, content, message):
    repo, settings = env
    sha = repo.head()
    if content == "__nan__":
        content = json.dumps(result_for(sha, samples=(1.0, float("nan"))))
    elif content == "__wrong_sha__":
        content = json.dumps(result_for("c" * 40))
    elif content == "__wrong_recipe__":
        doc = result_for(sha)
        doc["recipe"]["name"] = "other"
        content = json.dumps(doc)
    elif content == "__unknown_commit__":
        content, sha = json.dumps(result_for("d" * 40)), "d" * 40
    path = put(settings, content)
    with pytest.raises(ingest.IngestRejected, match=message.replace("$", r"\$").replace("(", r"\(")):
        ingest.ingest_file(settings, path, run_ctx(7, sha), "fixture")
    conn = store.connect(settings.results_db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 0
    assert not path.exists()
    kept = settings.incoming_dir / "rejected" / path.name
    assert kept.exists() and message in (kept.parent / (path.name + ".error")).read_text()
    # the rejection is remembered, so the reconciler will not re-queue the commit
    assert store.results_for(conn, [sha], "fixture@local") == {sha}


def test_missing_result_file_is_not_a_rejection(env):
    repo, settings = env
    with pytest.raises(ingest.NoResult, match="re-queued"):
        ingest.ingest_file(settings, settings.incoming_dir / "none.json", run_ctx(1, repo.head()), "fixture")
    conn = store.connect(settings.results_db)
    assert store.results_for(conn, [repo.head()], "fixture@local") == set()


def test_unreachable_repository_defers_and_a_retry_stores(env, tmp_path):
    repo, settings = env
    sha = repo.head()
    moved = tmp_path / "moved"
    repo.path.rename(moved)  # the repository is unreachable for now
    path = put(settings, result_for(sha))
    with pytest.raises(ingest.IngestDeferred, match="could not update the master's mirror"):
        ingest.ingest_file(settings, path, run_ctx(1, sha), "fixture")
    assert path.exists(), "a deferred result must be kept"
    still = ingest.retry_deferred(settings)
    assert len(still) == 1 and "still deferred" in still[0] and path.exists()
    moved.rename(repo.path)
    messages = ingest.retry_deferred(settings)
    assert len(messages) == 1 and "stored run" in messages[0]
    assert not path.exists()
    conn = store.connect(settings.results_db)
    assert [tuple(r) for r in conn.execute("SELECT sha, source FROM runs")] == [(sha, "poll")]


def test_a_failing_insert_leaves_nothing_behind(env, monkeypatch):
    repo, settings = env
    sha = repo.bench_commit("x", 5)

    def boom(*a, **k):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "insert_run", boom)  # simulate a failure inside the transaction
    with pytest.raises(ingest.IngestDeferred, match="disk I/O error"):
        ingest.ingest_file(settings, put(settings, result_for(sha)), run_ctx(1, sha), "fixture")
    conn = store.connect(settings.results_db)
    # nothing of the run is stored; the branch order is the repository's, kept whole for the next ingest
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 0
    assert store.commits.indexing(conn) == {}
    assert [sha for _, sha in store.commits.branch_order(conn, "master")][-1] == sha


# ---------------------------------------------------------------------------------------------- issue 12


def test_a_result_without_a_checked_out_revision_is_never_stored(env):
    # the git step failed: the previous build's result.json is still in the directory and was uploaded
    repo, settings = env
    old, new = repo.head(), repo.bench_commit("new", 2000)
    path = put(settings, result_for(old))
    with pytest.raises(ingest.NoResult, match="reported no revision.*re-queued"):
        ingest.ingest_file(settings, path, run_ctx(1, sha=None, revision=new), "fixture")
    assert not path.exists() and (settings.incoming_dir / "stale" / path.name).exists()
    conn = store.connect(settings.results_db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    # no rejection row either: a rejection counts as the commit's outcome and would stop the re-queue
    assert store.results_for(conn, [new, old], "fixture@local") == set()


def test_a_checkout_of_another_commit_than_resolved_is_no_result(env):
    repo, settings = env
    old, new = repo.head(), repo.bench_commit("new", 2000)
    ctx = store.RunContext(
        builder="fixture@local",
        worker="local",
        source="force",
        build_id=1,
        got_revision=old,
        revision="master",
        expected_sha=new,
    )
    with pytest.raises(ingest.NoResult, match=f"checked out {old[:12]}.*resolved .* to {new[:12]}"):
        ingest.ingest_file(settings, put(settings, result_for(old)), ctx, "fixture")


def test_the_run_ref_is_the_masters_not_the_workers(env):
    repo, settings = env
    sha = repo.head()
    ctx = store.RunContext(
        builder="fixture@local", worker="local", source="poll", build_id=1, got_revision=sha, ref="master"
    )
    ingest.ingest_file(settings, put(settings, result_for(sha, ref="--upload-pack=evil")), ctx, "fixture")
    conn = store.connect(settings.results_db)
    assert [tuple(r) for r in conn.execute("SELECT ref FROM runs")] == [("master",)]


def test_a_retried_build_request_is_stored_once(env):
    # Buildbot retries a request under a new build id after the master was killed: the key is the request
    repo, settings = env
    sha = repo.head()
    first = store.RunContext(
        builder="fixture@local", worker="local", source="poll", build_id=7, got_revision=sha, request_key="abc/3"
    )
    out = ingest.ingest_file(settings, put(settings, result_for(sha), "b-7.json"), first, "fixture")
    retried = store.RunContext(
        builder="fixture@local", worker="local", source="poll", build_id=8, got_revision=sha, request_key="abc/3"
    )
    path = put(settings, result_for(sha), "b-8.json")
    with pytest.raises(store.AlreadyStored) as info:
        ingest.ingest_file(settings, path, retried, "fixture")
    assert info.value.run_id == out.run_id and not path.exists()
    # a new master directory restarts Buildbot's ids: the same numbers from another instance are a new request
    other = store.RunContext(
        builder="fixture@local", worker="local", source="poll", build_id=7, got_revision=sha, request_key="def/3"
    )
    assert ingest.ingest_file(settings, put(settings, result_for(sha), "c-7.json"), other, "fixture").run_id
    conn = store.connect(settings.results_db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2


def db_at_schema(path: Path, version: int) -> sqlite3.Connection:
    """A results DB as a release at schema `version` left it (the migrations up to it, nothing later)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys=ON")
    for number, script in enumerate(store.MIGRATIONS[:version], start=1):
        for statement in store.connection._statements(script):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version={number}")
    return conn


def test_migration_5_keeps_old_runs_and_frees_build_ids(tmp_path):
    path = tmp_path / "r.sqlite"
    conn = db_at_schema(path, 4)
    conn.execute("INSERT INTO machines VALUES ('m', '{}', 0)")
    conn.execute(
        "INSERT INTO runs (sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, "
        "config_hash, status, source, build_id, log_excerpt, host_checks, noisy, ingested_at, result) "
        "VALUES ('a', 'a', 'master', 'b', 'w', 'm', 'r', 1, 'h', 'ok', 'poll', 5, '', '{}', 0, 0, '{}')"
    )
    conn.commit()
    conn.close()
    conn = store.connect(path)
    assert [tuple(r) for r in conn.execute("SELECT build_id, request_key FROM runs")] == [(5, None)]
    # build ids are no longer unique keys: a recreated Buildbot database numbers its builds from 1 again
    conn.execute(
        "INSERT INTO runs (sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, "
        "config_hash, status, source, build_id, log_excerpt, host_checks, noisy, ingested_at, result, "
        "request_key) VALUES ('b', 'b', 'master', 'b', 'w', 'm', 'r', 1, 'h', 'ok', 'poll', 5, '', '{}', "
        "0, 0, '{}', 'new/1')"
    )
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO runs (sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, "
            "config_hash, status, source, build_id, log_excerpt, host_checks, noisy, ingested_at, "
            "result, request_key) VALUES ('c', 'c', 'master', 'b', 'w', 'm', 'r', 1, 'h', 'ok', 'poll', "
            "6, '', '{}', 0, 0, '{}', 'new/1')"
        )


def test_migration_6_keeps_stored_measurements_in_their_series(tmp_path):
    # series identity moved from the run's config hash to each measurement's: stored rows take their run's hash,
    # so a series (and its change points, alerts and bisections) keeps every point it had
    path = tmp_path / "r.sqlite"
    conn = db_at_schema(path, 5)
    conn.execute("INSERT INTO machines VALUES ('m1', '{}', 0)")
    for run_id, config_hash in ((1, "h-one"), (2, "h-two")):
        conn.execute(
            "INSERT INTO runs (id, sha, revision, ref, builder, worker, machine_id, recipe, recipe_version, "
            "config_hash, status, source, build_id, log_excerpt, host_checks, noisy, ingested_at, result) "
            f"VALUES ({run_id}, 'a', 'a', 'master', 'b', 'w', 'm1', 'fixture', 1, ?, 'ok', 'poll', "
            f"{run_id}, '', '{{}}', 0, 0, '{{}}')",
            (config_hash,),
        )
        for workload in ("loop", "other"):
            conn.execute(
                "INSERT INTO measurements (run_id, workload, metric, unit, direction, samples, flags) "
                "VALUES (?, ?, 'throughput', 'ops/s', 'higher', '[1.0]', '[]')",
                (run_id, workload),
            )
    conn.commit()
    conn.close()
    conn = store.connect(path)
    assert [
        tuple(r)
        for r in conn.execute("SELECT run_id, workload, config_hash FROM measurements ORDER BY run_id, workload")
    ] == [(1, "loop", "h-one"), (1, "other", "h-one"), (2, "loop", "h-two"), (2, "other", "h-two")]
    # a later result of a recipe without per-workload hashes, under the same config, joins the same measure key
    doc = good()
    doc["recipe"]["config_hash"] = "h-two"
    with store.transaction(conn):
        run_id = store.insert_run(conn, doc, run_ctx(3, doc["commit"]["sha"]))
    assert conn.execute("SELECT config_hash FROM measurements WHERE run_id = ?", (run_id,)).fetchone()[0] == "h-two"


def test_migration_7_renames_the_alert_message_version_and_keeps_it(tmp_path):
    # "revision" is what a build checks out; an alert's message number is its message version (docs/glossary.md)
    path = tmp_path / "r.sqlite"
    conn = db_at_schema(path, 6)
    conn.execute(
        "INSERT INTO alerts (id, branch, kind, severity, sha, position, revision, signature, changes, "
        "created_at, updated_at) VALUES ('a-1', 'master', 'regression', 'warn', 's', 3, 4, '{}', "
        "'[[4, \"new line\"]]', 1, 2)"
    )
    conn.execute(
        "INSERT INTO alert_outbox (alert_id, channel, event, revision, idempotency_key, payload, "
        "available_at, created_at) VALUES ('a-1', 'chat', 'updated', 4, 'a-1/chat/r4', '{}', 0, 0)"
    )
    conn.commit()
    conn.close()
    conn = store.connect(path)
    a = store.alerts.alert(conn, "a-1")
    assert a is not None and a.message_version == 4 and a.changes == '[[4, "new line"]]'
    (d,) = store.alerts.outbox_for_alert(conn, "a-1")
    assert (d.message_version, d.event, d.channel) == (4, "updated", "chat")
    (row,) = store.alerts.claim(conn, "me", now=1.0, lease_seconds=60, limit=5)
    assert (row.message_version, row.key) == (4, "a-1/chat/r4")


def _raw(sha: str, **replace: str) -> str:
    """A result's JSON text with members replaced by raw JSON text (values json.dumps cannot make)."""
    doc = result_for(sha)
    marks = {}
    for key in replace:
        marks[key] = f"__{key}__"
        target = doc
        *parents, last = key.split(".")
        for p in parents:
            target = target[int(p)] if p.isdigit() else target[p]
        target[int(last) if last.isdigit() else last] = marks[key]
    out = json.dumps(doc)
    for key, text in replace.items():
        out = out.replace(json.dumps(marks[key]), text)
    return out


@pytest.mark.parametrize(
    "members, where",
    [
        ({"workloads.0.metrics.0.samples": "[1.0, 1" + "0" * 400 + "]"}, "$.workloads[0].metrics[0].samples[1]"),
        ({"workloads.0.metrics.0.samples": "[1" + "0" * 5000 + "]"}, "not valid JSON"),  # Python's 4,300 digits
        ({"host_checks": "[" * 100_000 + "]" * 100_000}, "nested too deeply"),  # RecursionError in json.loads
        ({"host_checks": '{"a":' * 50 + "1" + "}" * 50}, "$.host_checks.a.a.a"),
        ({"started_at": '{"t": 1}'}, "$.started_at"),  # SQLite cannot bind an object: deferred forever before
        ({"recipe.version": str(2**63)}, "$.recipe.version"),  # SQLite INTEGER overflow: deferred forever before
        ({"commit.ref": '"master\\ud800"'}, "$.commit.ref"),  # a lone surrogate: deferred forever before
        ({"machine.id": '"m\\u0000"'}, "$.machine.id"),
        ({"log_excerpt": '"\\udc80"'}, "$.log_excerpt"),
    ],
)
def test_malformed_values_are_rejected_once_with_their_path(env, members, where):
    repo, settings = env
    sha = repo.head()
    path = put(settings, _raw(sha, **members))
    with pytest.raises(ingest.IngestRejected) as info:
        ingest.ingest_file(settings, path, run_ctx(7, sha), "fixture")
    assert where in str(info.value)
    kept = settings.incoming_dir / "rejected" / path.name
    assert kept.exists() and not path.exists()
    assert where in (kept.parent / (path.name + ".error")).read_text(encoding="utf-8")
    conn = store.connect(settings.results_db)
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert [r[0] for r in conn.execute("SELECT revision FROM rejections")] == [sha]
    # rejected, not deferred: nothing is left for the reconciler to retry
    assert not list(settings.incoming_dir.glob("*.context")) and ingest.retry_deferred(settings) == []
